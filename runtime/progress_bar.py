"""The progress bar of training: Lightning's, showing what the module read at its last logging step.

Lightning's bar turns every logged progress-bar tensor into a number at every refresh; on a
GPU each of those waits for the device. This one shows ``progress_metrics``, plain numbers
the module reads once per logging interval, so the bar never stops a step.
"""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar


class TrainingProgressBar(TQDMProgressBar):
    """``TQDMProgressBar`` plus the module's ``progress_metrics`` (e.g. the loss at the last logging step)."""

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        return {**super().get_metrics(trainer, pl_module), **getattr(pl_module, "progress_metrics", {})}
