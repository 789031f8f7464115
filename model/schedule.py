"""Learning-rate schedules: step -> multiplier of the peak learning rate (for ``LambdaLR``)."""

from __future__ import annotations

import math
from typing import Callable


def inverse_sqrt_schedule(warmup_steps: int) -> Callable[[int], float]:
    """Linear warm-up to 1 over ``warmup_steps``, then 1/√step decay (Vaswani et al., 2017).

    >>> factor = inverse_sqrt_schedule(100)
    >>> factor(50), factor(100), factor(400)
    (0.5, 1.0, 0.5)
    """
    if warmup_steps < 1:
        raise ValueError(f"warmup_steps must be at least 1, got {warmup_steps}")

    def factor(step: int) -> float:
        step = max(step, 1)
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

    return factor
