"""Where a run's time went: every second of ``train()`` in one phase. A GPU runs ahead of the host, so entering any
phase but "steps" first waits for the device, charging the wait to the steps: no synchronisation per training step."""

import time
from collections.abc import Iterator
from contextlib import contextmanager

import lightning as L
import torch

from model.training.trainer_state import is_logging_step

PHASES = ("data", "steps", "validation", "views", "checkpoints", "test", "rest")


def split_line(split: dict) -> str:
    """``RunClock.split``'s answer in one line: ``time split: 30.2 min = steps 91.3% · validation 4.1% · ...``."""
    parts = " · ".join(f"{k} {100 * v:.1f}%" for k, v in split["share"].items() if v >= 0.0005)
    rates = f"{split['tokens_per_s_steps'] or 0:,.0f} tokens/s in steps, {split['tokens_per_s_wall'] or 0:,.0f}"
    return (f"time split: {split['wall_s'] / 60:.1f} min = {parts}; {split['steps']} steps, {rates} over the wall "
            f"time")


class RunClock:
    """Exclusive wall time per phase; phases nest (a checkpoint inside validation is the checkpoint's)."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.started = self._since = time.perf_counter()  # _since: when the innermost open phase last resumed
        self.device, self.seconds, self._open = torch.device(device), dict.fromkeys(PHASES, 0.0), []  # innermost last

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

    def stop(self, name: str) -> None:  # and any phase left open inside it (e.g. by an exception)
        if name in self._open:
            now = time.perf_counter()
            self.seconds[self._open[-1]] += now - self._since
            self._since = now
            while self._open.pop() != name:
                pass

    @contextmanager
    def phase(self, name: str, settle: bool = True) -> Iterator[None]:
        self.start(name, settle)
        try:
            yield
        finally:
            self.stop(name)

    def split(self, steps: int = 0, tokens: int = 0) -> dict:
        """Seconds and shares per phase so far ("rest": what no phase claimed), steps, real tokens and their rates."""
        for name in list(self._open):
            self.stop(name)
        total, seconds = time.perf_counter() - self.started, {name: self.seconds[name] for name in PHASES[:-1]}
        seconds["rest"] = max(total - sum(seconds.values()), 0.0)
        rate = lambda seconds: round(tokens / seconds, 1) if seconds else None  # noqa: E731
        return {"wall_s": round(total, 2), "seconds": {k: round(v, 2) for k, v in seconds.items()},
                "share": {k: round(v / total, 4) if total else 0.0 for k, v in seconds.items()},
                "steps": steps, "tokens": tokens, "tokens_per_s_steps": rate(seconds["steps"]),
                "tokens_per_s_wall": rate(total)}


class TimeSplit(L.Callback):
    """Times steps, validation and test on ``clock``; counts the steps' real tokens on the device, read at the end."""

    def __init__(self, clock: RunClock) -> None:
        self.clock, self.steps, self._tokens = clock, 0, None  # _tokens: the steps' real (source, target) tokens so far

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        self.clock.start("steps", settle=False)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx) -> None:
        self._tokens = outputs["tokens"] if self._tokens is None else self._tokens + outputs["tokens"]
        self.steps += 1
        if is_logging_step(trainer):  # the loggers read the device now anyway: charge its queue to the steps
            self.clock.wait_for_device()
        self.clock.stop("steps")

    on_validation_start = lambda self, trainer, pl_module: self.clock.start("validation")  # noqa: E731
    on_validation_end = lambda self, trainer, pl_module: self.clock.stop("validation")  # noqa: E731
    on_test_start = lambda self, trainer, pl_module: self.clock.start("test")  # noqa: E731
    on_test_end = lambda self, trainer, pl_module: self.clock.stop("test")  # noqa: E731

    def report(self) -> dict:
        """The split so far, with the steps' tokens (reads the device: call it at the end)."""
        return self.clock.split(self.steps, int(self._tokens.sum()) if self._tokens is not None else 0)
