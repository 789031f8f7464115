"""What validation shows of quality, beside the module's scores: time to quality and sample translations.

``QualityMarks`` logs ``val/minutes`` (training wall time, continued across a resume) beside
``val/bleu``, says once when validation BLEU first reaches 30, 40 and 50, keeps those crossings in
checkpoints and hands them to the test report. ``TranslationSamples`` shows wandb the first
validation translations in a table. ``ScoredEarlyStopping`` is Lightning's early stopping, counting
the validations that scored BLEU.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping

from model.training.trainer_state import fitting
from model.views.callback import wandb_loggers

log = logging.getLogger(__name__)
MARKS = (30, 40, 50)  # validation BLEU marks whose first crossing is logged


def training_minutes(pl_module: L.LightningModule, started: float | None) -> float:
    """Wall-clock minutes of training so far (validations included): the run's time budget, which continues
    across a resume, else since ``started``."""
    budget = getattr(pl_module, "time_budget", None)
    if budget is not None:
        return budget.elapsed() / 60
    return (time.perf_counter() - started) / 60 if started is not None else 0.0


class QualityMarks(L.Callback):
    """When validation BLEU first reached each of ``marks``: ``reached[str(mark)] = [step, minutes]``."""

    def __init__(self, marks: tuple[int, ...] = MARKS) -> None:
        self.marks = tuple(marks)
        self.reached: dict[str, list[float]] = {}
        self._started: float | None = None

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


class TranslationSamples(L.Callback):
    """The first ``rows`` validation translations (source, references, hypothesis) as a wandb table."""

    def __init__(self, rows: int = 20) -> None:
        self.rows = rows

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        scored = getattr(pl_module, "validation_rows", None)
        if trainer.sanity_checking or not trainer.is_global_zero or not scored or not pl_module.bleu_scored:
            return
        table = [[source, " | ".join(refs), hypothesis] for source, refs, hypothesis in scored[:self.rows]]
        for logger in wandb_loggers(trainer.loggers):
            logger.log_table(key="val/translations", columns=["source", "references", "hypothesis"], data=table)


class ScoredEarlyStopping(EarlyStopping):
    """Lightning's ``EarlyStopping``, asked only at the validations that scored BLEU (``module.val_bleu_every``):
    its ``patience`` counts scored validations, never a repeated score."""

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if getattr(pl_module, "bleu_scored", True):
            super().on_validation_end(trainer, pl_module)
