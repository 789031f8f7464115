"""Time to quality: when validation BLEU first reached 30, 40 and 50, in steps and training minutes (kept across a
resume; the test report copies it into ``test_metrics.json``), and ``val/minutes`` beside every ``val/bleu``."""

from __future__ import annotations

import logging
import time
from typing import Any

import lightning as L

from model.training.trainer_state import fitting

log = logging.getLogger(__name__)
MARKS = (30, 40, 50)  # validation BLEU marks whose first crossing is logged


def training_minutes(pl_module: L.LightningModule, started: float | None) -> float:
    """Training wall-clock minutes so far: the run's time budget (continued across a resume), else since ``started``."""
    if (budget := getattr(pl_module, "time_budget", None)) is not None:
        return budget.seconds_at(pl_module.global_step) / 60
    return (time.perf_counter() - started) / 60 if started is not None else 0.0


class QualityMarks(L.Callback):
    """Logs ``val/minutes``; keeps when validation BLEU first reached each mark: ``reached["30"] = [step, minutes]``."""

    def __init__(self, marks: tuple[int, ...] = MARKS) -> None:
        self.marks, self.reached, self._started = tuple(marks), {}, None  # _started: when this fit began

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._started = time.perf_counter()

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if fitting(trainer):  # beside val/bleu: time to quality in metrics.csv and wandb
            pl_module.log("val/minutes", training_minutes(pl_module, self._started))

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        bleu = trainer.callback_metrics.get("val/bleu")  # logged by the module at this validation's end
        if not fitting(trainer) or bleu is None or not getattr(pl_module, "bleu_scored", True):
            return
        minutes = training_minutes(pl_module, self._started)
        for mark in self.marks:
            if str(mark) not in self.reached and float(bleu) >= mark:
                self.reached[str(mark)] = [trainer.global_step, minutes]
                if trainer.is_global_zero:
                    log.info("validation BLEU reached %d at step %d, %.1f minutes into training",
                             mark, trainer.global_step, minutes)

    def state_dict(self) -> dict[str, Any]:
        return {"reached": self.reached}  # a resumed run still knows when it got there

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.reached = dict(state_dict.get("reached", {}))
