"""``trainer.precision: auto``: bf16 autocast only where this machine runs it faster than fp32.

CPUs with AVX512-BF16 or AMX run a bf16 matmul several times faster than fp32; CPUs
without them emulate bf16 and run it several times *slower*. So the choice is measured:
a matmul of the model's shapes in both precisions, a fraction of a second. GPUs with
bf16 support (Ampere and later) get bf16 autocast without a probe.
"""

from __future__ import annotations

import logging
import time

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)


def matmul_gflops(dtype: torch.dtype, rows: int = 2048, inner: int = 256, cols: int = 1024, repeats: int = 4) -> float:
    """CPU GFLOP/s of ``F.linear`` (rows, inner) x (cols, inner)ᵀ in ``dtype``, as the model's layers run it."""
    x, weight = torch.randn(rows, inner).to(dtype), torch.randn(cols, inner).to(dtype)
    F.linear(x, weight)  # warm-up: kernels chosen, memory allocated
    start = time.perf_counter()
    for _ in range(repeats):
        F.linear(x, weight)
    return 2 * rows * inner * cols * repeats / (time.perf_counter() - start) / 1e9


def choose_precision(accelerator: str = "auto", margin: float = 1.2) -> str:
    """Lightning's ``precision`` for this machine: ``bf16-mixed`` or ``32-true`` (logged in one line).

    On the CPU, bf16 must beat fp32 by ``margin`` to be chosen: autocast adds casts that a
    small win would not pay for.
    """
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())
    if on_gpu:
        choice = "bf16-mixed" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "32-true"
        log.info("precision auto: %s (GPU %s)", choice, torch.cuda.get_device_name() if torch.cuda.is_available() else "?")
        return choice
    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    choice = "bf16-mixed" if bf16 >= margin * fp32 else "32-true"
    log.info("precision auto: %s (CPU matmul at the model's shapes: bf16 %.0f vs fp32 %.0f GFLOP/s)", choice, bf16, fp32)
    return choice
