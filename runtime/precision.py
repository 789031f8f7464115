"""``runtime.precision: auto``: bf16 autocast only where this machine runs it faster than fp32.

CPUs with AVX512-BF16 or AMX run a bf16 matmul several times faster than fp32; CPUs
without them emulate bf16 and run it several times *slower*. So the choice is measured:
a matmul of the model's shapes in both precisions, a fraction of a second. GPUs with
bf16 support (Ampere and later) get bf16 autocast without a probe.

The same probe is the CPU's peak for MFU (``peak_flops``); a GPU's is its data-sheet figure.
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


@lru_cache(maxsize=None)  # one probe per dtype and shape a process: the choice and the MFU share it
def matmul_gflops(dtype: torch.dtype, rows: int = 2048, inner: int = 256, cols: int = 1024, repeats: int = 4) -> float:
    """CPU GFLOP/s of ``F.linear`` (rows, inner) x (cols, inner)ᵀ in ``dtype``, as the model's layers run it."""
    x, weight = torch.randn(rows, inner).to(dtype), torch.randn(cols, inner).to(dtype)
    F.linear(x, weight)  # warm-up: kernels chosen, memory allocated
    start = time.perf_counter()
    for _ in range(repeats):
        F.linear(x, weight)
    return 2 * rows * inner * cols * repeats / (time.perf_counter() - start) / 1e9


def choose_precision(gpu: bool, margin: float = 1.2) -> str:
    """Lightning's ``precision`` for training on a GPU (``gpu``) or this CPU: ``bf16-mixed`` or
    ``32-true`` (logged in one line).

    On the CPU, bf16 must beat fp32 by ``margin`` to be chosen: autocast adds casts that a
    small win would not pay for.
    """
    if gpu:
        choice = "bf16-mixed" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "32-true"
        log.info("precision auto: %s (GPU %s)", choice, torch.cuda.get_device_name() if torch.cuda.is_available() else "?")
        return choice
    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    choice = "bf16-mixed" if bf16 >= margin * fp32 else "32-true"
    log.info("precision auto: %s (CPU matmul at the model's shapes: bf16 %.0f vs fp32 %.0f GFLOP/s)", choice, bf16, fp32)
    return choice


# Dense bf16 tensor-core peak with fp32 accumulation (what autocast runs), TFLOP/s, from the vendors'
# data sheets, without sparsity. GeForce cards accumulate in fp32 at half their fp16-accumulate rate;
# the NVL boards run below the SXM modules of the same name. The first name found in
# ``torch.cuda.get_device_name()`` wins, so a name that contains another comes before it.
GPU_PEAK_BF16_TFLOPS = {
    "GB200": 2500.0, "B200": 2250.0, "GH200": 989.0, "H200 NVL": 835.0, "H200": 989.0, "H100 NVL": 835.0,
    "H100 PCIe": 756.0, "H100": 989.0, "H800": 989.0, "L40S": 362.0, "L40": 181.0, "L4": 121.0, "A100": 312.0,
    "A800": 312.0, "A10G": 70.0, "A10": 125.0, "RTX 6000 Ada": 364.0, "RTX A6000": 155.0, "RTX 5090": 209.5,
    "RTX 4090": 165.2, "RTX 4080": 97.5, "RTX 3090": 71.0, "RTX 3080": 59.5, "T4": 65.0, "V100": 125.0,
}


def gpu_peak_flops(name: str, precision: str) -> float | None:
    """A GPU's peak FLOP/s at this precision by its name, or None when the table does not know it
    (fp32 runs on TF32 tensor cores at half the bf16 rate)."""
    for model, tflops in GPU_PEAK_BF16_TFLOPS.items():
        if model in name:
            return tflops * 1e12 * (1.0 if "16" in precision else 0.5)
    return None


def peak_flops(precision: str, device: torch.device | str) -> float | None:
    """What MFU is measured against: a GPU's data-sheet peak, or on a CPU the matmul rate the precision
    probe measures at the model's shapes (so a CPU's MFU is "of its best matmul")."""
    device = torch.device(device)
    if device.type == "cuda":
        return gpu_peak_flops(torch.cuda.get_device_name(device), precision)
    return matmul_gflops(torch.bfloat16 if "bf16" in precision else torch.float32) * 1e9


def machine_name(device_type: str = "cpu") -> str:
    """What figures on ``device_type`` are measured on: the GPU's name for "cuda", else this CPU with the
    extensions that decide its speed (also on a host that has a GPU)."""
    if device_type == "cuda":
        return torch.cuda.get_device_name()
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                platform.processor() or "unknown CPU")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    extensions = [label for flag, label in (("avx512f", "AVX-512"), ("avx512_bf16", "AVX512-BF16"),
                                            ("amx_bf16", "AMX")) if flag in flags]
    return f"{name} ({', '.join(extensions) or 'no AVX-512'}, {os.cpu_count()} cores)"
