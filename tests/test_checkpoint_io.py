"""model/training/checkpoint_io.py: atomic checkpoint writes, and a resume point that is known to load."""

import errno
import logging

import pytest
import torch

import model.training.checkpoint_io as checkpoint_io
from model.inference.run_folder import read_checkpoint
from helpers import file_size_limit
from model.training.checkpoint_io import AtomicCheckpointIO, CheckpointWriteError, resume_point


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

    monkeypatch.setattr(checkpoint_io.torch, "save", dies_halfway)
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

    monkeypatch.setattr(checkpoint_io.torch, "save", slow_save)
    io = AtomicCheckpointIO(asynchronous=True)
    state = checkpoint(100, 1.0)
    io.save_checkpoint(state, target)  # returns at once: the write is in the background
    state["state_dict"]["model.w"].fill_(7.0)  # the next optimizer step, in place
    assert started.wait(30) and not target.exists() and writing == [100]
    release.set()
    io.save_checkpoint(checkpoint(200, 2.0), target.with_name("best.ckpt"))  # waits for the first
    assert torch.load(target, weights_only=True)["state_dict"]["model.w"].tolist() == [1.0, 1.0, 1.0]
    io.teardown()
    assert read_checkpoint(target.with_name("best.ckpt"))["global_step"] == 200
    assert sorted(p.name for p in target.parent.iterdir()) == ["best.ckpt", "last.ckpt"]


def test_a_failed_background_write_is_reported_by_the_next_save_or_the_end(tmp_path):
    target = tmp_path / "checkpoints" / "last.ckpt"
    io = AtomicCheckpointIO(asynchronous=True)
    io.save_checkpoint(checkpoint(100), target)
    io.wait()
    with file_size_limit(100_000):  # the OS refuses to grow a file past 100 kB: the disk is "full"
        io.save_checkpoint(big_checkpoint(200), target)
        with pytest.raises(CheckpointWriteError, match=r"\(File too large\)"):
            io.teardown()  # the end of fit
        io.save_checkpoint(big_checkpoint(300), target)
        with pytest.raises(CheckpointWriteError, match=r"last.ckpt: cannot write the checkpoint"):
            io.save_checkpoint(big_checkpoint(400), target)  # the next save
        io.wait()
    assert read_checkpoint(target)["global_step"] == 100  # the old one, whole
    assert list(target.parent.iterdir()) == [target]
