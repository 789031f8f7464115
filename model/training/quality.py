"""Callbacks that show a run's progress and quality beside the module's scores (``configs/callbacks/``)."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping, TQDMProgressBar

from model.training.trainer_state import fitting
from model.views.callback import wandb_loggers

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
    """Lightning's ``EarlyStopping``, asked only at validations that scored BLEU: ``patience`` counts those alone."""

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if getattr(pl_module, "bleu_scored", True):
            super().on_validation_end(trainer, pl_module)


class TrainingProgressBar(TQDMProgressBar):
    """``TQDMProgressBar`` plus the module's ``progress_metrics``: numbers read at logging steps (a bar that read logged
    tensors would wait for the GPU at every refresh). Off where stdout is not a terminal: a line per validation."""

    def __init__(self, refresh_rate: int = 1, terminal: bool | None = None) -> None:
        super().__init__(refresh_rate=refresh_rate)
        if not (sys.stdout.isatty() if terminal is None else terminal):
            self.disable()

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        return {**super().get_metrics(trainer, pl_module), **getattr(pl_module, "progress_metrics", {})}

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)
        if self.is_disabled and fitting(trainer) and trainer.is_global_zero:
            validation = ("val/", "val_original/")  # a fine-tune's original corpus beside its own
            shown = {**{k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith(validation)},
                     **getattr(pl_module, "progress_metrics", {})}
            logging.getLogger("train").info("step %d: %s", trainer.global_step,
                                            ", ".join(f"{k} {v:.3f}" for k, v in sorted(shown.items())))
