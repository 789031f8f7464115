"""The training budget, read at logging steps only: stop at ``trainer.max_time``, write ``last.ckpt``
every few minutes, and tell the learning-rate schedule how much of the budget is spent.

Lightning's own time limit and time-interval checkpoints ask every rank for rank 0's clock at
every step (a broadcast each), so with several GPUs every step waits for the host. Here the clock
is read at logging steps, where the host reads the device anyway: rank 0's seconds are broadcast
then, and between two readings every rank extrapolates from the same (step, seconds, seconds per
step). All ranks so take the same decision at the same step without a word between them:

    seconds(step) = seconds_read + (step - step_read) * pace     pace: seconds per step since the fit began
    stop at         step_read + ⌈(max_time - seconds_read) / pace⌉, once that falls before the next reading

The pace is the fit's average, validations included (what the time limit counts): one slow
window (a validation, the first step) does not move the stop. Committed only within the last
logging window, the stop lands within a window's time of ``max_time`` on any machine.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L

from model.training.timing import is_logging_step


MAX_TIME = re.compile(r"^\d+:\d+:\d+:\d+$")  # Lightning's DD:HH:MM:SS


def max_time_seconds(max_time: str | None) -> float | None:
    """Lightning's ``DD:HH:MM:SS`` in seconds (None: no time limit); ValueError for anything else."""
    if max_time is None:
        return None
    if not (isinstance(max_time, str) and MAX_TIME.match(max_time)):
        raise ValueError(f"max_time={max_time!r} is not DD:HH:MM:SS")
    days, hours, minutes, seconds = (int(part) for part in max_time.split(":"))
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


@dataclass(frozen=True)
class Reading:
    """The clock as every rank knows it: training seconds at a step, and the seconds per step before it."""

    step: int
    seconds: float
    pace: float | None = None


class TrainingBudget(L.Callback):
    """Stops training after ``max_time`` of wall time (validations included; continued across a resume),
    saves ``last.ckpt`` every ``save_every_minutes``, and gives ``progress(step)`` for the schedule."""

    def __init__(self, max_time: str | None = None, save_every_minutes: float | None = None) -> None:
        self.limit = max_time_seconds(max_time)
        self.save_every = save_every_minutes * 60 if save_every_minutes else None
        self.seconds_before = 0.0  # training seconds of the fits before this one (a resumed run)
        self.start = self.reading = Reading(0, 0.0)  # at this fit's start; the last reading
        self.stop_step: int | None = None  # the step every rank stops after (None: not yet known)
        self._started: float | None = None  # this fit's start on this rank's clock
        self._saved_at = 0.0  # training seconds at the last timed save

    def elapsed(self) -> float:
        """Training seconds so far by this rank's own clock (what is logged as ``val/minutes``)."""
        return self.seconds_before + (time.perf_counter() - self._started if self._started is not None else 0.0)

    def seconds(self, step: int) -> float:
        """Training seconds at ``step`` as every rank estimates them alike."""
        reading = self.reading
        return reading.seconds + (step - reading.step) * reading.pace if reading.pace else reading.seconds

    def progress(self, step: int, max_steps: int = -1) -> float | None:
        """Share of the budget spent at ``step``, 0 → 1: time over ``max_time`` or steps over ``max_steps``,
        whichever is further; None without either. The same on every rank (no collective)."""
        shares = [self.seconds(step) / self.limit] if self.limit else []
        shares += [step / max_steps] if max_steps > 0 else []
        return min(max(shares), 1.0) if shares else None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._started = time.perf_counter()
        self.start = self.reading = Reading(trainer.global_step, self.seconds_before)
        self._saved_at = self.seconds_before

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.seconds_before, self._started = self.elapsed(), None  # the clock stops with training

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        step = trainer.global_step
        if is_logging_step(trainer):
            self._read(trainer, step)
        if self.stop_step is not None and step >= self.stop_step:
            trainer.should_stop = True

    def _read(self, trainer: L.Trainer, step: int) -> None:
        """Rank 0's clock to every rank (one collective, at a logging step), and what follows from it."""
        seconds = float(trainer.strategy.broadcast(self.elapsed()))
        start = self.start
        pace = (seconds - start.seconds) / (step - start.step) if step > start.step else None
        self.reading = Reading(step, seconds, pace)
        if self.limit is not None and pace:
            steps_left = math.ceil((self.limit - seconds) / pace)
            if steps_left <= trainer.log_every_n_steps:  # before the next reading: every rank stops there
                self.stop_step = step + max(steps_left, 0)
        if self.save_every and seconds - self._saved_at >= self.save_every:
            self._saved_at = seconds
            trainer.save_checkpoint(Path(trainer.default_root_dir) / "checkpoints" / "last.ckpt")

    def state_dict(self) -> dict[str, Any]:
        return {"seconds": self.elapsed()}  # a resumed run goes on from here, as Lightning's Timer did

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.seconds_before = float(state_dict.get("seconds", 0.0))


def training_progress(trainer: L.Trainer | None, step: int) -> float | None:
    """Share of the training budget spent at ``step``, 0 → 1, for the learning-rate schedule (``None`` without
    a budget, or outside a Trainer). Every rank computes the same value: the replicas' rates never differ."""
    if trainer is None:
        return None
    budget = next((c for c in trainer.callbacks if isinstance(c, TrainingBudget)), None)
    if budget is None:
        return min(step / trainer.max_steps, 1.0) if trainer.max_steps > 0 else None
    return budget.progress(step, trainer.max_steps)
