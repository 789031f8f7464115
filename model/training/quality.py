"""Callbacks that show a run's progress beside the module's scores (``configs/callbacks/``); when validation BLEU
reached each mark is ``model/scoring/time_to_quality.py``'s."""

from __future__ import annotations

import logging
import sys
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping, TQDMProgressBar

from model.training.trainer_state import fitting
from model.views.callback import wandb_loggers


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
