"""What makes a run safe to stop: the time limit, Ctrl-C / SIGTERM and ``last.ckpt`` in one callback (a signal saves
and stops at once: a scheduler gives ~30 s before SIGKILL); checkpoints written whole or not at all; the resume point.

Lightning's ``Timer``, timed ``ModelCheckpoint`` and SIGTERM flag each broadcast at every step: several GPUs would wait
for the host each step. Here one all-reduce at a logging step (the host reads the device then anyway) carries rank 0's
clock, any rank's signal and the earliest non-finite loss: all ranks stop, save and schedule at the same step."""

import logging
import math
import re
import signal
import time
from contextlib import nullcontext
from pathlib import Path

import lightning as L
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.plugins.io import AsyncCheckpointIO

from data.atomic_file import atomic_file, os_cause
from model.inference.run_folder import RunLoadError, read_checkpoint
from model.training.schedule import TimeBudget
from model.training.trainer_state import is_logging_step, take_lightning_sigterm
from runtime.non_finite import NonFiniteGuard
from runtime.timing import RunClock

log = logging.getLogger(__name__)


def max_time_seconds(max_time: str | None) -> float | None:
    """Lightning's ``DD:HH:MM:SS`` in seconds (None: no time limit); ValueError for anything else."""
    if max_time is None:
        return None
    if not (isinstance(max_time, str) and re.fullmatch(r"\d+:\d+:\d+:\d+", max_time)):
        raise ValueError(f"max_time={max_time!r} is not DD:HH:MM:SS")
    return float(sum(int(n) * unit for n, unit in zip(max_time.split(":"), (86400, 3600, 60, 1))))


class TrainingInterrupted(Exception):
    """Training stopped on a signal after saving its resume point."""

    def __init__(self, signum: int, step: int, checkpoint: Path) -> None:
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        super().__init__(f"stopped by {signal.Signals(signum).name} at step {step}; saved {checkpoint}: "
                         f"run the same command to resume from it")


class StopAndClock(L.Callback):
    """Stops after ``max_time`` of training (validations included, across resumes), on a signal (Ctrl-C twice: at
    once, unsaved) or on ``guard``'s first non-finite loss; writes ``last.ckpt`` every N steps / M minutes."""

    state_key = "TrainingBudget"  # its state's name in earlier checkpoints: they resume with their clock

    def __init__(self, max_time: str | None = None, last_every_n_steps: int | None = None,
                 last_every_minutes: float | None = None, guard: NonFiniteGuard | None = None) -> None:
        self.budget, self.guard = TimeBudget(max_time_seconds(max_time)), guard
        self.every_n_steps, self.every_seconds = last_every_n_steps, (last_every_minutes or 0) * 60
        self.seconds_before = 0.0  # training seconds of the fits before this one (a resumed run)
        self.start_step, self.started = 0, None  # this fit's first step and its perf_counter (None: not training)
        self.stop_step: int | None = None  # the step every rank stops after (None: not yet known)
        self.saved_step: int | None = None  # the step last.ckpt holds
        self.saved_seconds = 0.0  # training seconds at the last timed save
        self.signum: int | None = None  # the first signal received (on this rank, until ranks agree)

    def elapsed(self) -> float:
        """Training seconds so far by this process's clock (validations included; across resumes)."""
        return self.seconds_before + (time.perf_counter() - self.started if self.started is not None else 0.0)

    def _record(self, signum: int, frame) -> None:
        if signum == signal.SIGINT and self.signum is not None:
            raise KeyboardInterrupt  # Ctrl-C again: do not wait for the step
        self.signum = self.signum or signum

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.start_step, self.started = trainer.global_step, time.perf_counter()
        self.saved_seconds = self.seconds_before
        self.budget.read(trainer.global_step, self.seconds_before, None)
        if self.guard is not None:
            self.guard.distributed = trainer.world_size > 1
        # Lightning's handlers are in place now (restored when fit ends); a SIGTERM they caught since is ours.
        self.signum = signal.SIGTERM if take_lightning_sigterm(trainer) else self.signum
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._record)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.seconds_before, self.started = self.elapsed(), None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        step, reading = trainer.global_step, is_logging_step(trainer)
        if reading:
            self._read(trainer, step)
        if self.signum is not None and (reading or trainer.world_size == 1):  # several ranks: agreed at readings
            raise TrainingInterrupted(self.signum, step, self.save(trainer))
        timed = reading and self.every_seconds and self.budget.seconds - self.saved_seconds >= self.every_seconds
        if timed or (self.every_n_steps and step % self.every_n_steps == 0):
            self.saved_seconds = self.budget.seconds if timed else self.saved_seconds
            self.save(trainer)
        if self.stop_step is not None and step >= self.stop_step:
            trainer.should_stop = True

    def _read(self, trainer: L.Trainer, step: int) -> None:
        """Rank 0's clock, any rank's signal and the earliest non-finite loss for all (one all-reduce); the stop."""
        seconds = self.elapsed() if trainer.is_global_zero else -math.inf
        values = torch.tensor([seconds, float(self.signum is not None), -math.inf], dtype=torch.float64,
                              device=trainer.strategy.root_device)
        if self.guard is not None and self.guard.first_bad is not None:  # (step, loss); step -1: none yet
            bad = self.guard.first_bad[0]
            values[2] = torch.where(bad >= 0, -bad, values[2])  # the earliest step is the largest negated one
        if trainer.world_size > 1:  # torch's own: Lightning's strategy.reduce adds a barrier before it
            torch.distributed.all_reduce(values, op=torch.distributed.ReduceOp.MAX)
        seconds, signalled, bad_step = values.tolist()
        self.signum = self.signum or (signal.SIGTERM if signalled else None)
        # Until the next reading every rank extrapolates alike: seconds(step) = seconds + (step - this step) * pace.
        pace = (seconds - self.seconds_before) / (step - self.start_step) if step > self.start_step else None
        self.budget.read(step, seconds, pace)
        if self.budget.limit is not None and pace:
            steps_left = math.ceil((self.budget.limit - seconds) / pace)
            if steps_left <= trainer.log_every_n_steps:  # before the next reading: every rank stops there
                self.stop_step = step + max(steps_left, 0)
        if self.guard is not None:
            self.guard.raise_if_bad(-bad_step)

    def save(self, trainer: L.Trainer) -> Path:
        """``last.ckpt`` now (once per step; collective: every rank calls it at the same step)."""
        path = Path(trainer.default_root_dir) / "checkpoints" / "last.ckpt"
        if self.saved_step != trainer.global_step:
            self.saved_step = trainer.global_step
            trainer.save_checkpoint(path, weights_only=False)  # the whole training state (said, not defaulted)
        return path

    def state_dict(self) -> dict:
        return {"seconds": self.elapsed()}  # a resumed run goes on from here, as Lightning's Timer does

    def load_state_dict(self, state_dict: dict) -> None:
        self.seconds_before = float(state_dict.get("seconds", 0.0))


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (a full disk, a read-only folder): the previous one is intact."""


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's ``torch.save`` checkpoints written whole or not at all, timed on ``clock``."""

    def __init__(self, clock: RunClock | None = None) -> None:
        super().__init__()
        self.clock = clock

    def save_checkpoint(self, checkpoint: dict, path: str | Path, storage_options=None) -> None:
        path = Path(path)
        with self.clock.phase("checkpoints") if self.clock is not None else nullcontext():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with atomic_file(path, "wb") as out:
                    torch.save(checkpoint, out)
            except (OSError, RuntimeError) as error:
                if (cause := os_cause(error)) is None:
                    raise
                raise CheckpointWriteError(cause.errno, f"{path}: cannot write the checkpoint "
                                           f"({cause.strerror or cause}); the previous one is intact") from None


def checkpoint_writer(asynchronous: bool, clock: RunClock) -> TorchCheckpointIO | AsyncCheckpointIO:
    """Atomic, and in a background thread where ``asynchronous`` (its copy of the tensors counts as the step's)."""
    return AsyncCheckpointIO(AtomicCheckpointIO()) if asynchronous else AtomicCheckpointIO(clock)


def resume_point(run_dir: Path) -> Path | None:
    """``last.ckpt``, else ``best.ckpt``, if it loads safely with a training state (an unreadable one is left)."""
    for path in (run_dir / "checkpoints" / "last.ckpt", run_dir / "checkpoints" / "best.ckpt"):
        try:
            if path.is_file() and "global_step" in read_checkpoint(path):
                return path
        except RunLoadError:
            log.warning("%s does not load (truncated, corrupt or not finite): not resuming from it", path)
    return None
