"""Shared fixtures: the real corpus built once per test session, in a temporary cache."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

from data.corpus import SHARED_COPY  # noqa: E402


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    assert SHARED_COPY.is_file(), f"the tests need the corpus at {SHARED_COPY}"
    return SHARED_COPY


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data_cache")


@pytest.fixture(scope="session")
def full_datamodule(corpus_path, data_cache):
    """The default data settings on the whole corpus (built once: ~10 s)."""
    from data.datamodule import TranslationDataModule

    dm = TranslationDataModule(corpus_path=str(corpus_path), cache_dir=str(data_cache))
    dm.setup()
    return dm


def run_train(run_dir: Path, data_cache: Path, *overrides: str, check: bool = True, **popen):
    """``python train.py experiment=smoke`` in a subprocess, as a user would run it."""
    import subprocess

    command = [sys.executable, str(ROOT / "train.py"), "experiment=smoke", f"hydra.run.dir={run_dir}",
               f"data.cache_dir={data_cache}", *overrides]
    if popen:
        return subprocess.Popen(command, cwd=ROOT, **popen)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, data_cache) -> Path:
    """A finished ``experiment=smoke`` run folder (wandb offline), shared by several tests."""
    run_dir = tmp_path_factory.mktemp("runs") / "smoke"
    run_train(run_dir, data_cache)
    return run_dir
