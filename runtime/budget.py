"""The training budget, read at logging steps only: stop at ``runtime.max_time``, and keep the clock that
the learning-rate schedule and the timed ``last.ckpt`` read (``TimeBudget``, model/training/schedule.py).

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
from typing import Any

import lightning as L

from model.training.schedule import TimeBudget
from model.training.trainer_state import is_logging_step


MAX_TIME = re.compile(r"^\d+:\d+:\d+:\d+$")  # Lightning's DD:HH:MM:SS


def max_time_seconds(max_time: str | None) -> float | None:
    """Lightning's ``DD:HH:MM:SS`` in seconds (None: no time limit); ValueError for anything else."""
    if max_time is None:
        return None
    if not (isinstance(max_time, str) and MAX_TIME.match(max_time)):
        raise ValueError(f"max_time={max_time!r} is not DD:HH:MM:SS")
    days, hours, minutes, seconds = (int(part) for part in max_time.split(":"))
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


class TrainingBudget(L.Callback):
    """Stops training after ``max_time`` of wall time (validations included; continued across a resume) and
    keeps ``clock``, the ``TimeBudget`` every rank reads alike (the schedule's progress, timed saves)."""

    def __init__(self, max_time: str | None = None) -> None:
        self.clock = TimeBudget(max_time_seconds(max_time))
        self.start = (0, 0.0)  # (step, seconds) at this fit's start
        self.stop_step: int | None = None  # the step every rank stops after (None: not yet known)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.start = (trainer.global_step, self.clock.seconds_before)
        self.clock.start(trainer.global_step)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.clock.stop()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        step = trainer.global_step
        if is_logging_step(trainer):
            self._read(trainer, step)
        if self.stop_step is not None and step >= self.stop_step:
            trainer.should_stop = True

    def _read(self, trainer: L.Trainer, step: int) -> None:
        """Rank 0's clock to every rank (one collective, at a logging step), and the stop that follows from it."""
        clock = self.clock
        seconds = float(trainer.strategy.broadcast(clock.elapsed()))
        start_step, start_seconds = self.start
        pace = (seconds - start_seconds) / (step - start_step) if step > start_step else None
        clock.read(step, seconds, pace)
        if clock.limit is not None and pace:
            steps_left = math.ceil((clock.limit - seconds) / pace)
            if steps_left <= trainer.log_every_n_steps:  # before the next reading: every rank stops there
                self.stop_step = step + max(steps_left, 0)

    def state_dict(self) -> dict[str, Any]:
        return {"seconds": self.clock.elapsed()}  # a resumed run goes on from here, as Lightning's Timer did

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.clock.seconds_before = float(state_dict.get("seconds", 0.0))
