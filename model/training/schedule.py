"""Learning-rate schedules: (step, progress) -> multiplier of the peak learning rate; progress is the share of the
training budget spent (``training_progress``), None without one. A run that stops on a clock should end with settled
weights, not a snapshot of a noisy walk: the default decays in *elapsed time*, to zero exactly when the time is up:

    lr = peak · min(1, step / warmup_steps) · (1 - progress)       (decay="linear")
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Callable

Schedule = Callable[[int, "float | None"], float]
DECAYS = ("linear", "cosine", "inverse_sqrt")


def schedule_problems(settings: Mapping, prefix: str = "") -> list[str]:
    """What ``budget_schedule`` refuses among ``settings``, one phrase each."""
    problems = []
    warmup = settings.get("warmup_steps", 1)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
        problems.append(f"{prefix}warmup_steps={warmup!r} must be a whole number >= 1")
    if settings.get("decay", "linear") not in DECAYS:
        problems.append(f"{prefix}decay={settings['decay']!r} must be one of {', '.join(DECAYS)}")
    final = settings.get("final", 0.0)
    if isinstance(final, bool) or not isinstance(final, (int, float)) or not 0.0 <= final <= 1.0:
        problems.append(f"{prefix}final={final!r} must be between 0 and 1")
    return problems


def budget_schedule(warmup_steps: int, decay: str = "linear", final: float = 0.0) -> Schedule:
    """Linear warm-up over ``warmup_steps``, times a decay from 1 to ``final`` over the budget: "linear" (1 - p),
    "cosine" (½(1 + cos πp)) or "inverse_sqrt" (1/√step after the warm-up, Vaswani et al. 2017; never reaching zero,
    every decay's fallback without a budget).

    >>> factor = budget_schedule(100)
    >>> factor(50, 0.0), factor(100, 0.0), factor(1000, 0.5), factor(2000, 1.0), factor(400, None)
    (0.5, 1.0, 0.5, 0.0, 0.5)
    """
    if problems := schedule_problems({"warmup_steps": warmup_steps, "decay": decay, "final": final}):
        raise ValueError("; ".join(problems))

    def factor(step: int, progress: float | None = None) -> float:
        step = max(step, 1)
        if progress is None or decay == "inverse_sqrt":  # no budget (or none followed): 1/√step after warm-up
            return min(step / warmup_steps, math.sqrt(warmup_steps / step))
        p = min(max(progress, 0.0), 1.0)
        shape = 1.0 - p if decay == "linear" else 0.5 * (1.0 + math.cos(math.pi * p))
        return min(step / warmup_steps, 1.0) * (final + (1.0 - final) * shape)  # warm-up · decay

    return factor


class TimeBudget:
    """Training seconds against a limit, the same on every rank: ``runtime/stop_and_clock.py`` updates the reading
    at logging steps and every rank extrapolates from it alike, so the replicas' learning rates never differ."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit  # seconds of training allowed (None: no time limit)
        self.step, self.seconds = 0, 0.0  # the last reading: training seconds at a step
        self.pace: float | None = None  # seconds per step before it (None: not measured yet)

    def read(self, step: int, seconds: float, pace: float | None) -> None:
        self.step, self.seconds, self.pace = step, seconds, pace

    def seconds_at(self, step: int) -> float:
        return self.seconds + (step - self.step) * self.pace if self.pace else self.seconds


def training_progress(step: int, max_steps: int = -1, budget: TimeBudget | None = None) -> float | None:
    """Share of the budget spent at ``step``, 0 → 1: time over its limit or steps over ``max_steps``, whichever is
    further; None without either."""
    shares = [budget.seconds_at(step) / budget.limit] if budget is not None and budget.limit else []
    shares += [step / max_steps] if max_steps > 0 else []
    return min(max(shares), 1.0) if shares else None
