"""Learning-rate schedules: (step, progress) -> multiplier of the peak learning rate.

``step`` counts optimizer updates; ``progress`` is the share of the training budget spent,
0 → 1 (``training_progress``: elapsed time over ``runtime.max_time``, or steps over
``trainer.max_steps``, whichever is further), or ``None`` when the run has no budget.

A run that stops on a clock should spend its last minutes at a small learning rate: the
weights it ends with are then the settled ones, not a snapshot of a noisy walk. So the
default decays in *elapsed time*, reaching zero exactly when the time is up, however many
steps this machine manages:

    lr = peak · min(1, step / warmup_steps) · (1 - progress)       (decay="linear")
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Callable

Schedule = Callable[[int, "float | None"], float]
DECAYS = ("linear", "cosine", "inverse_sqrt")


def schedule_problems(settings: Mapping, prefix: str = "") -> list[str]:
    """What ``budget_schedule`` (or ``inverse_sqrt_schedule``) refuses among ``settings``, one phrase each."""
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


def _check(**settings) -> None:
    if problems := schedule_problems(settings):
        raise ValueError("; ".join(problems))


def inverse_sqrt_schedule(warmup_steps: int) -> Schedule:
    """Linear warm-up to 1 over ``warmup_steps``, then 1/√step decay (Vaswani et al., 2017).

    Ignores the budget: it never reaches zero.

    >>> factor = inverse_sqrt_schedule(100)
    >>> factor(50, None), factor(100, None), factor(400, 0.9)
    (0.5, 1.0, 0.5)
    """
    _check(warmup_steps=warmup_steps)

    def factor(step: int, progress: float | None = None) -> float:
        step = max(step, 1)
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

    return factor


def budget_schedule(warmup_steps: int, decay: str = "linear", final: float = 0.0) -> Schedule:
    """Linear warm-up over ``warmup_steps``, times a decay from 1 to ``final`` over the budget.

    ``decay``: "linear" (1 - p) or "cosine" (½(1 + cos πp)), where p is the progress, or
    "inverse_sqrt" (``inverse_sqrt_schedule``, budget ignored). Without a budget (progress
    ``None``) every decay falls back to the inverse-square-root one.

    >>> factor = budget_schedule(100)
    >>> factor(50, 0.0), factor(100, 0.0), factor(1000, 0.5), factor(2000, 1.0)
    (0.5, 1.0, 0.5, 0.0)
    """
    _check(warmup_steps=warmup_steps, decay=decay, final=final)
    fallback = inverse_sqrt_schedule(warmup_steps)

    def factor(step: int, progress: float | None = None) -> float:
        if progress is None or decay == "inverse_sqrt":
            return fallback(step)
        p = min(max(progress, 0.0), 1.0)
        shape = 1.0 - p if decay == "linear" else 0.5 * (1.0 + math.cos(math.pi * p))
        warmup = min(max(step, 1) / warmup_steps, 1.0)
        return warmup * (final + (1.0 - final) * shape)

    return factor


class TimeBudget:
    """Training seconds against a limit, as every rank knows them. The run machinery's budget
    (``runtime/budget.py``) runs the clock and updates the reading (step, seconds, seconds per step) at
    logging steps; between two readings every rank extrapolates from the same numbers, so the replicas'
    learning rates never differ."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit  # seconds of training allowed (None: no time limit)
        self.step, self.seconds = 0, 0.0  # the last reading: training seconds at a step
        self.pace: float | None = None  # seconds per step before it (None: not measured yet)
        self.seconds_before = 0.0  # training seconds of the fits before this one (a resumed run)
        self.started: float | None = None  # this fit's start on this process's clock (None: not training)

    def read(self, step: int, seconds: float, pace: float | None) -> None:
        """A reading of the clock, the same on every rank: training seconds at ``step``, seconds per step."""
        self.step, self.seconds, self.pace = step, seconds, pace

    def seconds_at(self, step: int) -> float:
        """Training seconds at ``step`` as every rank estimates them alike."""
        return self.seconds + (step - self.step) * self.pace if self.pace else self.seconds

    def elapsed(self) -> float:
        """Training seconds so far by this process's own clock (validations included; across resumes)."""
        return self.seconds_before + (time.perf_counter() - self.started if self.started is not None else 0.0)

    def start(self, step: int) -> None:
        """A fit starts at ``step``: the clock runs, and the first reading is the seconds trained before."""
        self.started = time.perf_counter()
        self.read(step, self.seconds_before, None)

    def stop(self) -> None:
        """The fit ends: the clock stops (a next fit in this process goes on from here)."""
        self.seconds_before, self.started = self.elapsed(), None


def training_progress(step: int, max_steps: int = -1, budget: TimeBudget | None = None) -> float | None:
    """Share of the training budget spent at ``step``, 0 → 1: time over the ``budget``'s limit or steps over
    ``max_steps``, whichever is further; None without either."""
    shares = [budget.seconds_at(step) / budget.limit] if budget is not None and budget.limit else []
    shares += [step / max_steps] if max_steps > 0 else []
    return min(max(shares), 1.0) if shares else None
