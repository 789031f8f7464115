"""runtime/stop_and_clock.py's checkpoints: atomic checkpoint writes, and a resume point that is known to load (also
after a kill, a move of the run folder, a truncated ``last.ckpt``)."""

import errno
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

import runtime.stop_and_clock as checkpoint_module
from model.inference.run_folder import read_checkpoint
from helpers import NO_VIEWS, file_size_limit, final_step, run_train, train_in_process
from runtime.stop_and_clock import AtomicCheckpointIO, CheckpointWriteError, checkpoint_writer, resume_point
from runtime.timing import RunClock


def checkpoint(step: int, value: float = 1.0) -> dict:
    return {"state_dict": {"model.w": torch.full((3,), value)}, "global_step": step}


def big_checkpoint(step: int) -> dict:
    """400 kB of weights: over the file size limit the full-disk tests set."""
    return {"state_dict": {"model.w": torch.zeros(100_000)}, "global_step": step}


def test_a_write_killed_midway_leaves_the_old_checkpoint(tmp_path, monkeypatch):
    target = tmp_path / "checkpoints" / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint(checkpoint(100), target)
    real_save = torch.save

    def dies_halfway(obj, f):  # the process dies while torch.save is writing
        real_save(obj, f)
        f.truncate(10)
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint_module.torch, "save", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        io.save_checkpoint(checkpoint(200), target)
    assert torch.load(target, weights_only=True)["global_step"] == 100  # the old one, whole
    assert read_checkpoint(target)["global_step"] == 100
    assert list(target.parent.iterdir()) == [target]  # the half-written file is gone


def test_resume_point_skips_broken_checkpoints(tmp_path, caplog):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    assert resume_point(tmp_path) is None  # a new run
    torch.save(checkpoint(100), folder / "best.ckpt")
    (folder / "last.ckpt").write_bytes(b"PK\x03\x04 truncated by a kill")
    with caplog.at_level(logging.WARNING):
        assert resume_point(tmp_path) == folder / "best.ckpt"
    assert "last.ckpt does not load" in caplog.text
    torch.save(checkpoint(200, float("nan")), folder / "last.ckpt")  # diverged weights are no resume point
    assert resume_point(tmp_path) == folder / "best.ckpt"
    (folder / "best.ckpt").write_bytes(b"")
    assert resume_point(tmp_path) is None  # nothing usable: start afresh


def test_a_full_disk_is_one_line_and_leaves_the_old_checkpoint(tmp_path):
    target = tmp_path / "checkpoints" / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint(checkpoint(100), target)
    with file_size_limit(100_000), pytest.raises(CheckpointWriteError) as error:  # the OS refuses past 100 kB
        io.save_checkpoint(big_checkpoint(200), target)
    assert str(error.value.strerror) == f"{target}: cannot write the checkpoint (File too large); the previous one is intact"
    assert error.value.errno == errno.EFBIG
    assert read_checkpoint(target)["global_step"] == 100  # the old one, whole
    assert list(target.parent.iterdir()) == [target]  # no .partial left behind


def test_a_background_write_saves_the_weights_as_they_were_and_one_at_a_time(tmp_path, monkeypatch):
    """Asynchronous: the file holds the tensors of the moment of saving (training changes them in place
    right after), a second save waits for the first, and ``teardown`` leaves everything on disk."""
    import threading

    target = tmp_path / "checkpoints" / "last.ckpt"
    real_save, started, release, writing = torch.save, threading.Event(), threading.Event(), []

    def slow_save(obj, f):  # the writer thread holds here until the test lets it go
        writing.append(obj["global_step"])
        started.set()
        assert release.wait(30)
        real_save(obj, f)

    monkeypatch.setattr(checkpoint_module.torch, "save", slow_save)
    io = checkpoint_writer(asynchronous=True, clock=RunClock())  # Lightning's AsyncCheckpointIO around ours
    state = checkpoint(100, 1.0)
    io.save_checkpoint(state, target)  # returns at once: the write is in the background
    state["state_dict"]["model.w"].fill_(7.0)  # the next optimizer step, in place
    assert started.wait(30) and not target.exists() and writing == [100]
    io.save_checkpoint(checkpoint(200, 2.0), target.with_name("best.ckpt"))  # queued behind the first
    assert writing == [100]  # one writer: the second waits
    release.set()
    io.teardown()  # the end of fit: everything on disk
    assert torch.load(target, weights_only=True)["state_dict"]["model.w"].tolist() == [1.0, 1.0, 1.0]
    assert read_checkpoint(target.with_name("best.ckpt"))["global_step"] == 200 and writing == [100, 200]
    assert sorted(p.name for p in target.parent.iterdir()) == ["best.ckpt", "last.ckpt"]


def test_a_failed_background_write_is_reported_by_the_end_or_the_next_save(tmp_path):
    target = tmp_path / "checkpoints" / "last.ckpt"
    io = checkpoint_writer(asynchronous=True, clock=RunClock())
    io.save_checkpoint(checkpoint(100), target)
    io.teardown()
    with file_size_limit(100_000):  # the OS refuses to grow a file past 100 kB: the disk is "full"
        with pytest.raises(CheckpointWriteError, match=r"last.ckpt: cannot write the checkpoint \(File too large\)"):
            io.save_checkpoint(big_checkpoint(200), target)  # said here if the thread has failed already,
            io.teardown()  # else at the end of fit
        with pytest.raises(CheckpointWriteError, match=r"\(File too large\)"):
            io.save_checkpoint(big_checkpoint(300), target)  # any save after it
        with pytest.raises(CheckpointWriteError):
            io.teardown()
    assert read_checkpoint(target)["global_step"] == 100  # the old one, whole
    assert list(target.parent.iterdir()) == [target]


def test_killed_run_resumes_from_last_checkpoint(tmp_path, data_cache):
    run_dir = tmp_path / "killed"
    last = run_dir / "checkpoints" / "last.ckpt"
    args = ("logger=csv", "test=false", "trainer.max_steps=20", NO_VIEWS)
    process = run_train(run_dir, data_cache, *args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not last.is_file() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)  # a real kill: no clean-up code runs
    process.wait()
    assert last.is_file() and not (run_dir / "checkpoints" / "final.ckpt").exists(), "not killed mid-way"
    killed_at = torch.load(last, weights_only=True)["global_step"]
    assert 0 < killed_at < 20
    result = run_train(run_dir, data_cache, *args)  # same folder, no ckpt_path: resumes by itself
    assert "resuming the interrupted run" in result.stderr + result.stdout
    assert final_step(run_dir) == 20


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory, data_cache) -> Path:
    """30 of the smoke preset's 60 steps, as an interrupted run leaves its folder (trained once per module)."""
    run = tmp_path_factory.mktemp("interrupted") / "partial"
    train_in_process(run, data_cache, "logger=csv", "test=false", "trainer.max_steps=30")
    (run / "checkpoints" / "final.ckpt").unlink()
    return run


@pytest.fixture
def partial_run(interrupted_run, tmp_path) -> Path:
    """A copy of the interrupted run's folder, this test's to change."""
    return shutil.copytree(interrupted_run, tmp_path / "partial")


def test_a_moved_run_folder_resumes_without_version_suffixes(partial_run, tmp_path, data_cache):
    moved = tmp_path / "moved"
    partial_run.rename(moved)
    train_in_process(moved, data_cache, "logger=csv", "test=false")
    assert sorted(p.name for p in (moved / "checkpoints").glob("*.ckpt")) == ["best.ckpt", "final.ckpt", "last.ckpt"]
    assert final_step(moved) == 60


def test_a_truncated_last_checkpoint_is_skipped(partial_run, data_cache, caplog):
    last = partial_run / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:2000])  # a kill during a non-atomic write
    with caplog.at_level(logging.INFO):
        train_in_process(partial_run, data_cache, "logger=csv", "test=false")
    assert "last.ckpt does not load" in caplog.text
    assert f"resuming the interrupted run from {partial_run / 'checkpoints' / 'best.ckpt'}" in caplog.text
    assert final_step(partial_run) == 60
