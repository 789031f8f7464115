"""Ctrl-C and SIGTERM during training save the work: the current step ends, ``last.ckpt`` is
written (atomically, like every checkpoint), training stops, and ``train.py`` exits 130 / 143
with one line saying how to resume. A second Ctrl-C stops at once, as Ctrl-C usually does.

Schedulers (Slurm, Kubernetes, systemd) and ``kill`` send SIGTERM before they kill; a person
presses Ctrl-C. Either way the run continues from that step with the same command.
"""

from __future__ import annotations

import signal
from pathlib import Path

import lightning as L

from model.training.trainer_state import is_logging_step, skip_sigterm_broadcast
from runtime.checkpoint_io import LastCheckpoint

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(Exception):
    """Training stopped on a signal after saving its resume point."""

    def __init__(self, signum: int, step: int, checkpoint: Path) -> None:
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        super().__init__(f"stopped by {signal.Signals(signum).name} at step {step}; saved {checkpoint}: "
                         f"run the same command to resume from it")


class GracefulStop(L.Callback):
    """Records SIGINT / SIGTERM while training, and at the end of the step has ``last`` save ``last.ckpt``,
    then stops."""

    def __init__(self, last: LastCheckpoint) -> None:
        self.last = last
        self.signum: int | None = None  # the first signal received
        self.saved: Path | None = None  # the checkpoint written on it
        self._previous: dict[int, object] = {}

    def _record(self, signum: int, frame) -> None:
        if signum == signal.SIGINT and self.signum is not None:
            raise KeyboardInterrupt  # Ctrl-C again: do not wait for the step
        self.signum = self.signum or signum

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # After Lightning's own handlers are in place (it restores the ones from before fit at the end).
        for signum in SIGNALS:
            self._previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self._record)
        # Lightning's own SIGTERM flag is never set now: this callback's decision at logging steps stands in.
        skip_sigterm_broadcast(trainer)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        # Every rank must agree before the (collective) save: one of them may have the signal first. With
        # several ranks they are asked at logging steps only, where the host waits anyway: a signal is
        # answered within log_every_n_steps steps, and no other step waits for the others.
        if self.saved or (trainer.world_size > 1 and not is_logging_step(trainer)):
            return
        if not trainer.strategy.reduce_boolean_decision(self.signum is not None, all=False):
            return
        self.signum = self.signum or signal.SIGTERM
        self.saved = self.last.save(trainer)
        trainer.should_stop = True

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def raise_if_interrupted(self, step: int) -> None:
        """After ``fit``: ``TrainingInterrupted`` if a signal stopped it."""
        if self.saved is not None:
            raise TrainingInterrupted(self.signum, step, self.saved)
