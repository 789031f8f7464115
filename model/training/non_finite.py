"""The non-finite-loss guard: no update from a NaN or inf loss, decided on the device.

A check like ``if not torch.isfinite(loss)`` before every update reads the loss back to
Python, and on a GPU that waits for the whole step. Instead the decision stays on the
device: a fused optimizer skips the update itself (its ``found_inf``, as under a gradient
scaler), and the first bad (step, loss) is kept there until someone asks, at a logging step,
before a checkpoint is written, and when training ends; the run then stops, naming it.
With an optimizer that is not fused, the updates until that check do happen, but they are
never saved: the last checkpoint stays good.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or inf: going on would only write broken weights."""


class NonFiniteGuard:
    """Records the first non-finite training loss on the device; ``check`` raises ``NonFiniteLossError``."""

    def __init__(self) -> None:
        self.first_bad: Tensor | None = None  # (step, loss) of the first non-finite loss; step -1: none yet

    def update(self, loss: Tensor, step: int, optimizer: torch.optim.Optimizer | None) -> None:
        """After the forward pass of step ``step``, before its update: nothing here waits for the device."""
        bad = (~torch.isfinite(loss.detach())).float()
        if dist.is_available() and dist.is_initialized():  # one rank's bad loss is every rank's (gradients are shared)
            dist.all_reduce(bad, op=dist.ReduceOp.MAX)  # a collective on the device, not a wait for the host
        bad = bad > 0
        if self.first_bad is None:
            self.first_bad = torch.full((2,), -1.0, dtype=torch.float64, device=loss.device)
        record = torch.stack([torch.full_like(self.first_bad[0], step), loss.detach().double()])
        self.first_bad = torch.where(bad & (self.first_bad[0] < 0), record, self.first_bad)
        if optimizer is not None and optimizer.defaults.get("fused"):
            optimizer.found_inf = bad.float()  # read by the fused step after this closure: 1 skips the update

    def check(self) -> None:
        """Raise ``NonFiniteLossError`` if any step so far had a non-finite loss (reads the device)."""
        if self.first_bad is None:
            return
        step, value = self.first_bad.tolist()
        if step >= 0:
            raise NonFiniteLossError(f"the training loss is {value} at step {int(step)}")
