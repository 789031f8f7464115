"""Shared fixtures: the real corpus built once per test session, in a temporary cache; one smoke run."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

from data.corpus import SHARED_COPY  # noqa: E402
from helpers import train_in_process  # noqa: E402


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


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, data_cache) -> Path:
    """A finished ``experiment=smoke`` run folder (wandb offline), shared by several tests."""
    run_dir = tmp_path_factory.mktemp("runs") / "smoke"
    train_in_process(run_dir, data_cache)
    return run_dir
