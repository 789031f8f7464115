"""An exponential moving average of the weights while training (``averaging=ema``): Lightning's ``WeightAveraging``
keeps the average, swaps it in for validation, saves it (and restores it on resume) and copies it into the model when
training ends, so the test, ``final.ckpt`` and the exports hold it.

A run on a clock ends after a few thousand steps on a CPU and many more on a GPU, so the decay ramps up with the
number of updates ``n`` (TensorFlow's ``ExponentialMovingAverage`` with ``num_updates``):

    decay_n = min(decay, (1 + n) / (10 + n))     average = decay_n · average + (1 - decay_n) · weights

which averages over about the last (10 + n) / 9 steps until ``decay`` caps it: the first (random) weights fade at
once instead of lingering for ``1 / (1 - decay)`` steps. The update is one fused ``lerp`` over all tensors with the
decay computed on the host from a Python counter: torch's ``AveragedModel.update_parameters`` reads its update count
back from the device at every step, which a GPU step must not wait for.
"""

from __future__ import annotations

import itertools
from contextlib import nullcontext
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import WeightAveraging

from model.training.trainer_state import averaged_model


def ramped_decay(decay: float, updates: int) -> float:
    """``min(decay, (1 + n) / (10 + n))`` for ``n`` = ``updates`` already averaged (0: the first copies)."""
    return 0.0 if updates == 0 else min(decay, (1 + updates) / (10 + updates))


class ExponentialAverage(WeightAveraging):
    """The weights' exponential moving average after every optimizer step, its decay ramped (``ramped_decay``)."""

    def __init__(self, decay: float = 0.999) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay={decay!r} must be in [0, 1)")
        super().__init__()
        self.decay, self.updates, self.averaged_at = decay, 0, 0  # averaged_at: the step of the last update
        self.clock: Any = None  # the run's clock (runtime/timing.py), set by the run machinery: the updates timed

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        averaged_model(self).to(pl_module.device)  # built in setup, before the model went to its device

    @torch.no_grad()
    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        if trainer.global_step == self.averaged_at:  # no optimizer step in this batch (gradient accumulation)
            return
        average = averaged_model(self)
        averaged = list(itertools.chain(average.module.parameters(), average.module.buffers()))
        current = [t.detach().to(a.dtype) for a, t in zip(averaged, itertools.chain(pl_module.parameters(),
                                                                                      pl_module.buffers()))]
        with self.clock.phase("averaging", settle=False) if self.clock is not None else nullcontext():
            torch._foreach_lerp_(averaged, current, 1.0 - ramped_decay(self.decay, self.updates))
            average.n_averaged += 1  # kept as Lightning's checkpoints expect it; never read here
        self.updates, self.averaged_at = self.updates + 1, trainer.global_step

    # Lightning swaps the training weights back when the validation epoch ends, before the module's own
    # on_validation_epoch_end and whichever callbacks follow this one there: swapped back when validation ends
    # instead (still before ModelCheckpoint, which Lightning runs last), everything in validation sees the average.
    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        pass

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_epoch_end(trainer, pl_module)

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"updates": self.updates, "averaged_at": self.averaged_at}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self.updates, self.averaged_at = state_dict["updates"], state_dict["averaged_at"]
