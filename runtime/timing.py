"""Where a run's time went: a phase clock, the callback that times training, and the run's FLOPs.

Every second of ``train.py``'s work (``train()``, from settings to test) lands in one phase:
data preparation, optimizer steps, validation, attention views, checkpoint writes, test, or
the rest (building the model and trainer, Lightning's loop between steps, fetching batches). A GPU
runs ahead of the host, so a phase timed on the host alone would be charged for the steps
still queued; entering any phase but "steps" therefore first waits for the device and
charges that wait to the steps. That is the only synchronisation the clock adds: one per
validation, checkpoint or logging step, never one per training step.

    clock = RunClock(device)
    with clock.phase("data"): ...            # train.py
    TimeSplit(clock)                         # the callback: steps, validation; tokens and FLOPs
    clock.split()                            # seconds per phase, shares, tokens/s, MFU
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import lightning as L
import torch
from torch import Tensor

from model.training.trainer_state import is_logging_step

PHASES = ("data", "steps", "validation", "views", "checkpoints", "test", "rest")


class RunClock:
    """Exclusive wall time per phase; phases nest (a checkpoint inside validation is the checkpoint's)."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.started = time.perf_counter()
        self.device = torch.device(device)
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._open: list[str] = []  # the phases entered and not yet left, innermost last
        self._since = self.started  # when the innermost open phase last resumed

    def wait_for_device(self) -> None:
        """Let the device finish what is queued; the wait belongs to whatever queued it (steps at the top level)."""
        if self.device.type == "cuda" and torch.cuda.is_initialized():
            with self.phase("steps", settle=False):
                torch.cuda.synchronize(self.device)

    def start(self, name: str, settle: bool = True) -> None:
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r} (phases: {', '.join(PHASES)})")
        if settle and not self._open:
            self.wait_for_device()
        now = time.perf_counter()
        if self._open:
            self.seconds[self._open[-1]] += now - self._since
        self._open.append(name)
        self._since = now

    def stop(self, name: str) -> None:
        """Leave ``name`` (and any phase left open inside it, e.g. by an exception)."""
        if name not in self._open:
            return
        now = time.perf_counter()
        while self._open:
            inner = self._open.pop()
            self.seconds[inner] += now - self._since
            self._since = now
            if inner == name:
                return

    @contextmanager
    def phase(self, name: str, settle: bool = True) -> Iterator[None]:
        self.start(name, settle)
        try:
            yield
        finally:
            self.stop(name)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def split(self, work: Work | None = None, peak_flops: float | None = None) -> TimeSplitReport:
        """Seconds per phase so far ("rest" = what no phase claimed), with the training work done."""
        for name in list(self._open):
            self.stop(name)
        total = self.elapsed()
        seconds = {name: self.seconds[name] for name in PHASES if name != "rest"}
        seconds["rest"] = max(total - sum(seconds.values()), 0.0)
        return TimeSplitReport(total, seconds, work or Work(), peak_flops)


@dataclass
class Work:
    """What the optimizer steps processed: steps, real (non-padding) tokens and model FLOPs."""

    steps: int = 0
    tokens: int = 0
    flops: float = 0.0


@dataclass
class TimeSplitReport:
    """A run's wall time by phase, its throughput and model FLOPs utilisation."""

    total_s: float
    seconds: dict[str, float]
    work: Work = field(default_factory=Work)
    peak_flops: float | None = None  # FLOP/s the hardware can do at this precision (None: unknown)

    def as_dict(self) -> dict:
        steps_s = self.seconds["steps"]
        return {
            "wall_s": round(self.total_s, 2),
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
            "share": {k: round(v / self.total_s, 4) if self.total_s else 0.0 for k, v in self.seconds.items()},
            "steps": self.work.steps,
            "tokens": self.work.tokens,
            "tokens_per_s_steps": round(self.work.tokens / steps_s, 1) if steps_s else None,
            "tokens_per_s_wall": round(self.work.tokens / self.total_s, 1) if self.total_s else None,
            "model_tflops": round(self.work.flops / 1e12, 3),
            "peak_tflops": round(self.peak_flops / 1e12, 3) if self.peak_flops else None,
            "mfu": round(self.work.flops / steps_s / self.peak_flops, 4) if steps_s and self.peak_flops else None,
        }

    def line(self) -> str:
        """One line for the log: ``time split: 30.2 min = steps 91.3% · validation 4.1% · ...``."""
        d = self.as_dict()
        parts = " · ".join(f"{k} {100 * v:.1f}%" for k, v in d["share"].items() if v >= 0.0005)
        rates = (f"{d['tokens_per_s_steps'] or 0:,.0f} tokens/s in steps, {d['tokens_per_s_wall'] or 0:,.0f} over "
                 f"the wall time")
        mfu = f", MFU {100 * d['mfu']:.1f}%" if d["mfu"] is not None else ""
        return f"time split: {self.total_s / 60:.1f} min = {parts}; {d['steps']} steps, {rates}{mfu}"


def dense_macs_per_token(model: torch.nn.Module) -> tuple[int, int]:
    """Multiply-adds of the weight matrices per real source token and per real target token (forward).

    Every 2-D weight of the encoder acts on source tokens, and so do the cross-attention's
    K/V rows (they read the memory); the rest of the decoder and the output layer act on
    target tokens. Embedding lookups cost nothing.
    """
    source, target = 0, 0
    for name, p in model.named_parameters():
        if p.dim() != 2 or "embed" in name:
            continue
        if name.startswith("encoder_layers."):
            source += p.numel()
        elif name.endswith("cross_attn.in_proj_weight"):
            rows = p.size(0) // 3  # [W_Q; W_K; W_V]
            target += rows * p.size(1)
            source += 2 * rows * p.size(1)
        elif name.startswith("decoder_layers."):
            target += p.numel()
    output = getattr(model, "output", None)
    if output is not None:
        target += output.weight.numel()  # tied or not, the projection is a matmul
    return source, target


def attention_macs(model: torch.nn.Module, batch: int, src_len: int, tgt_len: int) -> int:
    """Multiply-adds of QKᵀ and weights·V for one padded batch (forward), all layers."""
    d = model.src_embed.token.embedding_dim
    encoder = len(model.encoder_layers) * 2 * batch * src_len * src_len * d
    decoder_self = len(model.decoder_layers) * 2 * batch * tgt_len * tgt_len * d
    cross = sum(layer.cross_attn is not None for layer in model.decoder_layers) * 2 * batch * tgt_len * src_len * d
    return encoder + decoder_self + cross


class TimeSplit(L.Callback):
    """Times the optimizer steps and validation on ``clock`` and counts the steps' tokens (what the module's
    ``training_step`` returns as ``tokens``) and FLOPs on the device (read once, at the end): training FLOPs =
    3 × forward (forward + backward), 2 per multiply-add."""

    def __init__(self, clock: RunClock) -> None:
        self.clock = clock
        self._token_counts: Tensor | None = None  # (source, target) real tokens so far, on the device
        self._attention_macs = 0
        self._steps = 0
        self._per_token: tuple[int, int] | None = None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        self.clock.start("steps", settle=False)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int) -> None:
        model, counts = pl_module.model, outputs["tokens"]  # (source, target) real tokens, on the device
        self._token_counts = counts if self._token_counts is None else self._token_counts + counts
        self._attention_macs += attention_macs(model, batch["src"].size(0), batch["src"].size(1),
                                               batch["tgt_out"].size(1))
        self._steps += 1
        if is_logging_step(trainer):  # the loggers read the device now anyway: charge its queue to the steps
            self.clock.wait_for_device()
        self.clock.stop("steps")

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.clock.start("validation")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.clock.stop("validation")

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.clock.start("test")

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.clock.stop("test")

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._per_token = dense_macs_per_token(pl_module.model)

    def work(self) -> Work:
        """The steps' work so far (reads the device's counters: call it at the end)."""
        if self._token_counts is None or self._per_token is None:
            return Work(self._steps)
        src_tokens, tgt_tokens = self._token_counts.tolist()
        macs = self._per_token[0] * src_tokens + self._per_token[1] * tgt_tokens + self._attention_macs
        return Work(self._steps, src_tokens + tgt_tokens, 3 * 2 * float(macs))
