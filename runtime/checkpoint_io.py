"""Checkpoints that survive faults: atomic writes, ``last.ckpt`` by one writer, and a resume point that is
known to load.

A kill during ``torch.save`` leaves a truncated file; written in place, that file is
``last.ckpt``, and every rerun would crash on it. So every checkpoint is written to a
temporary file beside its target, flushed to disk, then renamed over it (a rename is
atomic): a reader sees the old file or the new one, never half of one.

On a GPU the write goes to a background thread (``asynchronous=True``): the training process
only copies the tensors to the host, and the next step starts while the file is written. One
writer: a new checkpoint first waits for the previous one, and the run waits for the last.

``last.ckpt``, what an interrupted run resumes from, has one writer, ``LastCheckpoint``: every N steps,
every M minutes of training (decided at logging steps, on the time budget's reading), and when a signal
stops the run (``interrupt.py`` asks it).
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.fabric.utilities.apply_func import apply_to_collection

from data.atomic_file import atomic_file, os_cause
from model.inference.run_folder import RunLoadError, read_checkpoint
from model.training.schedule import TimeBudget
from model.training.trainer_state import is_logging_step
from runtime.timing import RunClock

log = logging.getLogger(__name__)


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (a full disk, a read-only folder): the previous one is intact."""


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's ``torch.save`` checkpoints, written atomically (temporary file, fsync, rename).

    A write that fails leaves no temporary file and the previous checkpoint whole, and is one
    ``CheckpointWriteError`` naming the file and the cause (from a background write: raised by
    the next save, or when training ends). ``clock`` (a ``RunClock``) times the training
    process's part as "checkpoints".
    """

    def __init__(self, asynchronous: bool = False, clock: RunClock | None = None) -> None:
        super().__init__()
        self.asynchronous, self.clock = asynchronous, clock
        self._writer: ThreadPoolExecutor | None = None
        self._writing: Future | None = None

    def _timed(self):
        return self.clock.phase("checkpoints") if self.clock is not None else nullcontext()

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        with self._timed():
            self.wait()  # one writer; and a failed background write is reported here
            if not self.asynchronous:
                write_atomically(checkpoint, Path(path))
                return
            # Copies, not views: training changes the weights in place while the file is written.
            snapshot = apply_to_collection(checkpoint, torch.Tensor, lambda t: t.detach().to("cpu", copy=True))
            if self._writer is None:
                self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-writer")
            self._writing = self._writer.submit(write_atomically, snapshot, Path(path))

    def wait(self) -> None:
        """Until the background write (if any) is on disk; raises its ``CheckpointWriteError``."""
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def load_checkpoint(self, path, *args, **kwargs) -> dict[str, Any]:
        self.wait()  # never read a file that is still being written
        return super().load_checkpoint(path, *args, **kwargs)

    def remove_checkpoint(self, path) -> None:
        self.wait()
        super().remove_checkpoint(path)

    def teardown(self) -> None:
        """End of fit (Lightning calls it): the last write reaches the disk before the run goes on."""
        with self._timed():
            try:
                self.wait()
            finally:
                if self._writer is not None:
                    self._writer.shutdown(wait=True)
                    self._writer = None


class LastCheckpoint(L.Callback):
    """Writes ``<run>/checkpoints/last.ckpt``, the resume point: every ``every_n_steps`` steps, every
    ``every_minutes`` of training on ``time_budget``'s readings (at logging steps, where every rank has the
    same reading), and on ``save(trainer)``. Every rank calls the save at the same step (it is collective)."""

    def __init__(self, every_n_steps: int | None = None, every_minutes: float | None = None,
                 time_budget: TimeBudget | None = None) -> None:
        self.every_n_steps, self.every_seconds = every_n_steps, (every_minutes or 0) * 60
        self.time_budget = time_budget
        self._saved_step: int | None = None
        self._saved_seconds = 0.0  # training seconds at the last timed save

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._saved_seconds = self.time_budget.seconds if self.time_budget is not None else 0.0

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        step = trainer.global_step
        if self.every_n_steps and step % self.every_n_steps == 0:
            self.save(trainer)
        elif self.every_seconds and self.time_budget is not None and is_logging_step(trainer):
            if self.time_budget.seconds - self._saved_seconds >= self.every_seconds:
                self._saved_seconds = self.time_budget.seconds
                self.save(trainer)

    def save(self, trainer: L.Trainer) -> Path:
        """``last.ckpt`` now (once per step), on every rank's call."""
        path = Path(trainer.default_root_dir) / "checkpoints" / "last.ckpt"
        if self._saved_step != trainer.global_step:
            self._saved_step = trainer.global_step
            trainer.save_checkpoint(path)
        return path


def write_atomically(checkpoint: dict[str, Any], path: Path) -> None:
    """``torch.save`` to ``path`` whole or not at all (``data.atomic_file``)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path, "wb") as out:
            torch.save(checkpoint, out)
    except (OSError, RuntimeError) as error:
        cause = os_cause(error)
        if cause is None:
            raise
        raise CheckpointWriteError(cause.errno, f"{path}: cannot write the checkpoint "
                                                f"({cause.strerror or cause}); the previous one is intact") from None


def resume_point(run_dir: Path) -> Path | None:
    """The checkpoint an interrupted run resumes from: ``last.ckpt``, else ``best.ckpt``, if it loads
    (``read_checkpoint``: safely, with finite weights) and holds a training state.

    An unreadable one is skipped with a warning (and left in place for inspection); with
    none left the run starts afresh.
    """
    for name in ("last.ckpt", "best.ckpt"):
        path = run_dir / "checkpoints" / name
        if not path.is_file():
            continue
        try:
            if "global_step" in read_checkpoint(path):
                return path
        except RunLoadError:
            pass
        log.warning("%s does not load (truncated, corrupt or not finite): not resuming from it", path)
    return None
