"""``runtime.precision: auto``: bf16 autocast only where native and faster. CPUs without AVX512-BF16 or AMX emulate bf16
several times slower than fp32, so a CPU's choice is measured. GPUs: native bf16, else fp16 on tensor cores, else fp32.
"""

from __future__ import annotations

import logging
import os
import platform
import time
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)


@lru_cache(maxsize=None)  # one probe per dtype and shape a process
def matmul_gflops(dtype: torch.dtype, rows: int = 2048, inner: int = 256, cols: int = 1024, repeats: int = 4) -> float:
    """CPU GFLOP/s of ``F.linear`` (rows, inner) x (cols, inner)ᵀ in ``dtype``, as the model's layers run it."""
    x, weight = torch.randn(rows, inner).to(dtype), torch.randn(cols, inner).to(dtype)
    F.linear(x, weight)  # warm-up: kernels chosen, memory allocated
    start = time.perf_counter()
    for _ in range(repeats):
        F.linear(x, weight)
    return 2 * rows * inner * cols * repeats / (time.perf_counter() - start) / 1e9


def choose_precision(gpu: bool, margin: float = 1.2) -> str:
    """Lightning's ``precision`` on a GPU (``gpu_precision``) or the CPU (bf16 must beat fp32 by ``margin``), logged."""
    if gpu:
        choice = gpu_precision()
        log.info("precision auto: %s (GPU %s)", choice,
                 torch.cuda.get_device_name() if torch.cuda.is_available() else "?")
        return choice
    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    choice = "bf16-mixed" if bf16 >= margin * fp32 else "32-true"  # autocast's casts: a small win would not pay
    log.info("precision auto: %s (CPU matmul at the model's shapes: bf16 %.0f vs fp32 %.0f GFLOP/s)",
             choice, bf16, fp32)
    return choice


def gpu_precision() -> str:
    """bf16-mixed where native (Ampere on; T4, V100 emulate it), else 16-mixed on tensor cores (7.x), else 32-true."""
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False):
        return "bf16-mixed"
    return "16-mixed" if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (7, 0) else "32-true"


def machine_name(device_type: str = "cpu") -> str:
    """The GPU's name for "cuda", else this CPU's with the extensions that decide its speed (also on a GPU host)."""
    if device_type == "cuda":
        return torch.cuda.get_device_name()
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                platform.processor() or "unknown CPU")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    extensions = [label for flag, label in (("avx512f", "AVX-512"), ("avx512_bf16", "AVX512-BF16"),
                                            ("amx_bf16", "AMX")) if flag in flags]
    return f"{name} ({', '.join(extensions) or 'no AVX-512'}, {os.cpu_count()} cores)"
