"""A NaN or inf loss or gradient, decided on the device: reading the loss back would wait for the step. A fused
optimizer (the GPU recipe's AdamW) skips that update via ``found_inf``; any other takes it, and its weights are
never saved: the bad loss stops the run at the next check, before a checkpoint is written."""

from __future__ import annotations

import torch
import torch.distributed as dist


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or inf: going on would only write broken weights."""


class NonFiniteGuard:
    """Records the first non-finite training loss and the skipped updates on the device; ``check`` raises."""

    def __init__(self) -> None:
        self.first_bad: torch.Tensor | None = None  # (step, loss) of this rank's first bad loss; step -1: none yet
        self.skipped: torch.Tensor | None = None  # updates skipped so far (a non-finite loss or gradient)
        self._loss_bad: torch.Tensor | None = None  # this step's loss is not finite
        self.distributed = False  # several ranks train together (the stop-and-clock callback says, as fit starts)

    def update(self, loss: torch.Tensor, step: int) -> None:
        """After the forward pass of step ``step``: nothing here waits for the device."""
        if self.first_bad is None:
            self.first_bad = torch.full((2,), -1.0, dtype=torch.float64, device=loss.device)
            self.skipped = torch.zeros((), device=loss.device)
        self._loss_bad = ~torch.isfinite(loss.detach())
        record = torch.stack([torch.full_like(self.first_bad[0], step), loss.detach().double()])
        self.first_bad = torch.where(self._loss_bad & (self.first_bad[0] < 0), record, self.first_bad)

    def clip_and_skip(self, parameters, optimizer: torch.optim.Optimizer, clip_value: float | None,
                      algorithm: str | None) -> None:
        """Clip the gradients ("norm" or "value"), then ``skip_update`` on their total norm. Without a scaler (bf16) the
        gradients are the true ones: clipping them is right, also with a fused AdamW (Lightning refuses it for fp16)."""
        parameters = [p for p in parameters if p.grad is not None]
        if clip_value and algorithm in (None, "norm"):
            norm = torch.nn.utils.clip_grad_norm_(parameters, clip_value)  # the norm before clipping
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in parameters])
            if clip_value:
                torch.nn.utils.clip_grad_value_(parameters, clip_value)
        self.skip_update(norm, optimizer)

    def skip_update(self, gradient_norm: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        """A non-finite gradient norm or loss makes a fused optimizer skip this update (no other reads ``found_inf``).
        DDP averages gradients before the norm: one rank's bad loss makes every rank's norm non-finite; all skip."""
        bad = ~torch.isfinite(gradient_norm)
        if self._loss_bad is not None and not self.distributed:
            bad = bad | self._loss_bad
        if self.skipped is not None:
            self.skipped += bad
        if optimizer.defaults.get("fused"):  # its step reads found_inf as a scaler sets it (undocumented: tested)
            optimizer.found_inf = bad.float()

    def raise_if_bad(self, earliest: float) -> None:
        """Raise ``NonFiniteLossError`` if ``earliest``, the first bad step of any rank (inf: none), is a step."""
        if 0 <= earliest < float("inf"):
            step, value = self.first_bad.tolist()
            what = f"the training loss is {value}" if step == earliest else "another rank's training loss is not finite"
            raise NonFiniteLossError(f"{what} at step {int(earliest)}")

    def check(self) -> None:
        """``raise_if_bad`` for every rank's losses so far (reads the device; under DDP a collective, on every rank)."""
        if self.first_bad is not None:
            step = torch.where(self.first_bad[0] < 0, float("inf"), self.first_bad[0])
            if self.distributed:  # the earliest bad step of any rank: every rank raises together
                dist.all_reduce(step, op=dist.ReduceOp.MIN)
            self.raise_if_bad(step.item())

