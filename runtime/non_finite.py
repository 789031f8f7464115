"""The non-finite guard: no update from a NaN or inf loss or gradient, decided on the device.

A check like ``if not torch.isfinite(loss)`` before every update reads the loss back to
Python, and on a GPU that waits for the whole step. Instead the decision stays on the
device: the gradient norm (which clipping computes anyway) and the loss are tested there, and a
fused optimizer skips the update itself (its ``found_inf``, as under a gradient scaler). The
first bad loss is kept there until someone asks, at a logging step, before a checkpoint is
written, and when training ends; the run then stops, naming it. An update skipped for a
non-finite gradient alone (a finite loss) is counted and the run goes on, as under a scaler.

Under DDP the gradients are averaged across ranks before the norm is taken, so one rank's bad
loss makes every rank's norm non-finite: all skip the same update without a collective of ours.
With an optimizer that is not fused, the updates until the next check do happen, but they are
never saved: the last checkpoint stays good.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from model.training.metrics import distributed


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or inf: going on would only write broken weights."""


class NonFiniteGuard:
    """Records the first non-finite training loss and the skipped updates on the device;
    ``check`` raises ``NonFiniteLossError``."""

    def __init__(self) -> None:
        self.first_bad: Tensor | None = None  # (step, loss) of this rank's first non-finite loss; step -1: none yet
        self.skipped: Tensor | None = None  # updates skipped so far (a non-finite loss or gradient)
        self._loss_bad: Tensor | None = None  # this step's loss is not finite

    def update(self, loss: Tensor, step: int) -> None:
        """After the forward pass of step ``step``: nothing here waits for the device."""
        if self.first_bad is None:
            self.first_bad = torch.full((2,), -1.0, dtype=torch.float64, device=loss.device)
            self.skipped = torch.zeros((), device=loss.device)
        self._loss_bad = ~torch.isfinite(loss.detach())
        record = torch.stack([torch.full_like(self.first_bad[0], step), loss.detach().double()])
        self.first_bad = torch.where(self._loss_bad & (self.first_bad[0] < 0), record, self.first_bad)

    def clip_and_skip(self, parameters, optimizer: torch.optim.Optimizer, clip_value: float | None,
                      algorithm: str | None) -> None:
        """Clip the gradients as configured ("norm" or "value"), then ``skip_update`` on their total norm.

        bf16 autocast has no loss scaler: its gradients are the true ones and clipping them is right,
        also with a fused AdamW, which Lightning's mixed-precision plugin refuses for the sake of fp16's
        scaled gradients; so without a scaler the module clips here."""
        parameters = [p for p in parameters if p.grad is not None]
        if clip_value and algorithm in (None, "norm"):
            norm = torch.nn.utils.clip_grad_norm_(parameters, clip_value)  # the norm before clipping
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in parameters])
            if clip_value:
                torch.nn.utils.clip_grad_value_(parameters, clip_value)
        self.skip_update(norm, optimizer)

    def skip_update(self, gradient_norm: Tensor, optimizer: torch.optim.Optimizer) -> None:
        """Before the update, with the gradients' total norm: a non-finite norm (or, on one process, loss)
        makes a fused optimizer skip this update."""
        bad = ~torch.isfinite(gradient_norm)
        if self._loss_bad is not None and not distributed():  # under DDP the norm already says it for all ranks
            bad = bad | self._loss_bad
        if self.skipped is not None:
            self.skipped += bad
        skip_fused_update(optimizer, bad)

    def check(self) -> None:
        """Raise ``NonFiniteLossError`` if any step so far had a non-finite loss, on any rank (reads the
        device; under DDP one collective, so every rank calls it at the same points)."""
        if self.first_bad is None:
            return
        step, value = self.first_bad.tolist()
        what = f"the training loss is {value}"
        if distributed():  # the earliest bad step of any rank: every rank raises together
            earliest = torch.full_like(self.first_bad[0], step if step >= 0 else float("inf"))
            dist.all_reduce(earliest, op=dist.ReduceOp.MIN)
            if earliest.item() != step:
                step, what = earliest.item(), "another rank's training loss is not finite"
        if 0 <= step < float("inf"):
            raise NonFiniteLossError(f"{what} at step {int(step)}")


def skip_fused_update(optimizer: torch.optim.Optimizer, skip: Tensor) -> None:
    """Make a fused optimizer's next step skip its update where ``skip`` (a 0-d bool tensor, on the device) is
    true, without reading it back: torch's fused step reads ``found_inf`` (an undocumented attribute, as a
    gradient scaler sets it; tests/test_non_finite.py checks it still works). Other optimizers are left alone."""
    if optimizer.defaults.get("fused"):
        optimizer.found_inf = skip.float()
