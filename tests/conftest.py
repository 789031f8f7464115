"""Shared fixtures: the real corpus (found as train.py finds it), its data built once per test session
in a temporary cache, and one smoke run."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

from helpers import run_train  # noqa: E402

# Tests that need the real corpus, its data built or a trained run: the slow tier.
SLOW_FIXTURES = {"corpus_path", "data_cache", "full_datamodule", "smoke_run", "slow_run"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that uses a slow fixture (``python -m pytest -m "not slow"`` leaves them
    out), and leave out the ``cuda`` tests unless ``-m`` names them (``scripts/gpu_check.sh``: ``-m cuda``)."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    if "cuda" not in config.getoption("markexpr"):
        on_gpu = [item for item in items if item.get_closest_marker("cuda")]
        config.hook.pytest_deselected(items=on_gpu)
        items[:] = [item for item in items if not item.get_closest_marker("cuda")]


ROOT = Path(__file__).resolve().parents[1]
RUN_OUTPUTS = ("outputs", "multirun", "wandb", "lightning_logs")  # where a run that forgot its folder writes


def checkout_files() -> set[str]:
    """The checkout's untracked files (git's word) and whatever lies in the run-output folders."""
    import subprocess

    listed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                            text=True).stdout.splitlines()
    files = {line[3:] for line in listed if line.startswith("??")}
    for folder in RUN_OUTPUTS:
        files |= {str(path.relative_to(ROOT)) for path in (ROOT / folder).rglob("*")}
    return files


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[CHECKOUT_KEY] = checkout_files()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Tests write only into temporary folders: a file new in the checkout fails the run, naming it."""
    before = session.config.stash.get(CHECKOUT_KEY, None)
    new = sorted(checkout_files() - before) if before is not None else []
    if new:
        print(f"\nthe tests left files in the checkout: {', '.join(new[:10])}" + (" ..." if len(new) > 10 else ""))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


CHECKOUT_KEY = pytest.StashKey[set]()


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    """The Tatoeba corpus where ``python train.py`` would find it: ``$SPA_ENG_DATA``, ``../shared/data/``,
    the cache, else a download into the cache. Without any of these: one line saying how to provide it."""
    from data.corpus import CorpusNotFoundError, locate_corpus

    try:
        return locate_corpus()
    except CorpusNotFoundError as error:
        pytest.fail(f"these tests need the Tatoeba corpus. {error}", pytrace=False)


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
def smoke_run(tmp_path_factory, corpus_path, data_cache) -> Path:
    """A finished ``python train.py experiment=smoke`` run folder (wandb offline), shared by several tests; what
    the command printed (to a pipe, as into a log file) is ``console.txt`` beside it."""
    run_dir = tmp_path_factory.mktemp("runs") / "smoke"
    result = run_train(run_dir, data_cache, f"data.corpus_path={corpus_path}")
    (run_dir.parent / "console.txt").write_text(result.stdout + result.stderr)
    return run_dir


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium, driven by selenium (the explorer's and the server page's tests)."""
    from scripts.screenshot_explorer import INSTALL_HINT, headless_chromium

    try:
        driver = headless_chromium()
    except RuntimeError as error:
        if os.environ.get("CI"):  # CI installs the browser: there, a missing one is a failure
            raise
        pytest.skip(f"{error} ({INSTALL_HINT})")
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def slow_run(smoke_run, tmp_path_factory) -> Path:
    """The smoke run's tokenizer and settings with a larger, untrained model: its translations run to the
    length limit (it rarely says EOS), so a long request is real work for the server's tests."""
    import shutil

    import torch

    from model.inference.run_folder import read_checkpoint
    from model.transformer import Seq2SeqTransformer

    run = tmp_path_factory.mktemp("runs") / "slow"
    shutil.copytree(smoke_run, run, ignore=shutil.ignore_patterns("checkpoints", "ctranslate2*", "wandb", "csv"))
    state = read_checkpoint(smoke_run / "checkpoints" / "final.ckpt")
    config = state["hyper_parameters"]["model_config"] | dict(d_model=128, num_heads=4, num_encoder_layers=2,
                                                              num_decoder_layers=2, d_ff=512)
    torch.manual_seed(0)
    model = Seq2SeqTransformer(**config)
    state["hyper_parameters"]["model_config"] = config
    state["state_dict"] = {f"model.{k}": v for k, v in model.state_dict().items()}
    (run / "checkpoints").mkdir()
    torch.save(state, run / "checkpoints" / "final.ckpt")
    return run
