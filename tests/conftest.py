"""Shared fixtures: the real corpus (found as train.py finds it), its data built once per test session
in a temporary cache, and one smoke run; with pytest-xdist's workers (``-n``), once for all of them."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
if (workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))) > 1:  # each worker its share of the cores
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))

from helpers import ROOT, train_command  # noqa: E402

# Tests that need the real corpus, its data built or a trained run: the slow tier.
SLOW_FIXTURES = {"corpus_path", "data_cache", "full_datamodule", "smoke_run", "slow_run"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that uses a slow fixture (``python -m pytest -m "not slow"`` leaves them
    out), and leave out the ``cuda`` tests unless ``-m`` names them (``scripts/gpu_check.sh``: ``-m cuda``).
    The files that read the smoke run go last: it trains beside the others from the first test on."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    reads_smoke_run = {item.path for item in items if "smoke_run" in getattr(item, "fixturenames", ())}
    items.sort(key=lambda item: item.path in reads_smoke_run)  # stable: each file's own order kept
    if "cuda" not in config.getoption("markexpr"):
        on_gpu = [item for item in items if item.get_closest_marker("cuda")]
        config.hook.pytest_deselected(items=on_gpu)
        items[:] = [item for item in items if not item.get_closest_marker("cuda")]


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


def session_folder(tmp_path_factory, name: str) -> Path:
    """A folder of this test session that every xdist worker sees (the workers' temporary folders' parent)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory) -> Path:
    return session_folder(tmp_path_factory, "data_cache")  # the cache itself takes one builder at a time


@pytest.fixture(scope="session")
def full_datamodule(corpus_path, data_cache):
    """The default data settings on the whole corpus (built once: ~10 s)."""
    from data.datamodule import TranslationDataModule

    dm = TranslationDataModule(corpus_path=str(corpus_path), cache_dir=str(data_cache))
    dm.setup()
    return dm


def start_smoke_run(request: pytest.FixtureRequest, tmp_path_factory) -> Path:
    """``python train.py experiment=smoke`` started once for the session (all workers), its output and exit code
    written beside the run folder; returns that folder's parent."""
    import shlex
    import subprocess

    from filelock import FileLock

    runs = session_folder(tmp_path_factory, "runs")
    with FileLock(str(runs / "smoke.lock")):
        if (runs / "started").exists():
            return runs
        (runs / "started").touch()
    command = shlex.join(train_command(runs / "smoke", request.getfixturevalue("data_cache"),
                                       f"data.corpus_path={request.getfixturevalue('corpus_path')}"))
    out, err, code = (shlex.quote(str(runs / name)) for name in ("stdout", "stderr", "exit"))
    process = subprocess.Popen(["sh", "-c", f"{command} >{out} 2>{err}; echo $? >{code}.partial; mv {code}.partial "
                                f"{code}"], cwd=ROOT)
    request.session.config.add_cleanup(process.wait)  # a worker done early still lets it finish for the others
    return runs


@pytest.fixture(scope="session", autouse=True)
def smoke_run_under_way(request, tmp_path_factory) -> None:
    """Where a test of the session reads the smoke run, it starts with the first test and trains beside the rest."""
    from data.corpus import CorpusNotFoundError, locate_corpus

    if any("smoke_run" in item.fixturenames for item in request.session.items):
        try:
            locate_corpus()
        except CorpusNotFoundError:
            return  # said by the tests that need it (corpus_path)
        start_smoke_run(request, tmp_path_factory)


@pytest.fixture(scope="session")
def smoke_run(request, tmp_path_factory, corpus_path, data_cache) -> Path:
    """A finished ``python train.py experiment=smoke`` run folder (wandb offline), shared by several tests; what
    the command printed (to a pipe, as into a log file) is ``console.txt`` beside it."""
    import time

    from data.atomic_file import write_text_atomically

    runs = start_smoke_run(request, tmp_path_factory)
    deadline = time.monotonic() + 900
    while not (runs / "exit").exists():
        if time.monotonic() > deadline:
            pytest.fail("the smoke run has not ended in 15 minutes")
        time.sleep(0.2)
    console = (runs / "stdout").read_text() + (runs / "stderr").read_text()
    assert (runs / "exit").read_text().strip() == "0", console[-3000:]
    write_text_atomically(runs / "console.txt", console)  # each worker alike, none read half of it
    return runs / "smoke"


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
