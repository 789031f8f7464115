"""The machine a run trains on, decided once: GPU or CPU, how many devices, which recipe, which precision. Every
``auto`` in ``configs/`` is settled here into plain values, so the components downstream never look at CUDA themselves.
CPUs without AVX512-BF16 or AMX emulate bf16 several times slower than fp32, so a CPU's precision is measured."""

from __future__ import annotations

import logging
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from omegaconf import DictConfig, open_dict

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Machine:
    """Where training runs: on CUDA GPUs or the CPU, on how many devices, under which recipe."""

    gpu: bool
    devices: int
    name: str  # the GPU, or the CPU with the extensions that decide its speed
    recipe: str  # the experiment preset composed ("cpu": the composed defaults)

    def line(self) -> str:
        """One log line: what was found and which recipe it trains."""
        count = f"{self.devices} × " if self.devices > 1 else ""
        other = "experiment=cpu forces the CPU recipe" if self.gpu else "experiment=gpu forces the GPU recipe"
        return f"machine: {count}{self.name}; recipe: experiment={self.recipe} ({other})"


def with_recipe(argv: Sequence[str], cuda: bool | None = None) -> list[str]:
    """``argv`` with ``experiment=gpu`` added where CUDA is found, unless ``experiment=`` or ``trainer.accelerator=``
    decides (a preset is a config group: chosen before Hydra composes; DDP's other ranks inherit the command line)."""
    decided = {arg.partition("=")[0].lstrip("+~") for arg in argv if "=" in arg} & {"experiment", "trainer.accelerator"}
    gpu = not decided and (torch.cuda.is_available() if cuda is None else cuda)
    return [*argv, "experiment=gpu"] if gpu else list(argv)


def decide_machine(cfg: DictConfig, recipe: str | None = None) -> Machine:
    """The machine ``cfg.trainer`` asks for on this host (``auto``: a GPU where CUDA is found)."""
    accelerator = cfg.trainer.get("accelerator", "auto")
    gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())
    devices = cfg.trainer.get("devices", 1)
    if devices in ("auto", -1, "-1"):  # every GPU of the node; one process on a CPU
        devices = max(torch.cuda.device_count(), 1) if gpu else 1
    name = machine_name("cuda" if gpu and torch.cuda.is_available() else "cpu")
    return Machine(gpu=gpu, devices=int(devices), name=name, recipe=recipe or "cpu")


def settle_settings(cfg: DictConfig, machine: Machine) -> None:
    """Write ``machine``'s answer into every ``auto`` of ``cfg`` (and set TF32 where fp32 runs on a GPU)."""
    with open_dict(cfg):
        cfg.trainer.accelerator, cfg.trainer.devices = "gpu" if machine.gpu else "cpu", machine.devices
        if cfg.runtime.precision == "auto":  # bf16 only where native and faster (choose_precision)
            cfg.runtime.precision = choose_precision(machine.gpu)
        if cfg.data.get("on_device", False) == "auto":  # token ids on the GPU, batches cut there
            cfg.data.on_device = machine.gpu
        if cfg.runtime.asynchronous_checkpoints == "auto":  # a host copy, then the write beside training
            cfg.runtime.asynchronous_checkpoints = machine.gpu
        if (views := cfg.get("callbacks", {}).get("attention_views")) is not None and views.get("background") == "auto":
            views.background = machine.gpu  # views drawn beside training: a CPU's cores are all training's
        if (average := cfg.get("callbacks", {}).get("weight_averaging")) is not None and average.get("device") == "auto":
            average.device = "cuda" if machine.gpu else "cpu"  # Lightning copies the weights before they move there
    if machine.gpu and cfg.runtime.precision in ("32-true", "32", 32):  # TF32 tensor cores: ~8x, 10-bit mantissa
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True


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
    """Lightning's ``precision``, logged. A GPU: bf16-mixed where native (Ampere on; T4, V100 emulate it), else
    16-mixed on tensor cores (7.x), else 32-true. A CPU: bf16-mixed where it beats fp32 by ``margin``, measured."""
    if gpu:
        cuda = torch.cuda.is_available()
        choice = ("bf16-mixed" if cuda and torch.cuda.is_bf16_supported(including_emulation=False) else
                  "16-mixed" if cuda and torch.cuda.get_device_capability() >= (7, 0) else "32-true")
        log.info("precision auto: %s (GPU %s)", choice, torch.cuda.get_device_name() if cuda else "?")
        return choice
    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    choice = "bf16-mixed" if bf16 >= margin * fp32 else "32-true"  # autocast's casts: a small win would not pay
    log.info("precision auto: %s (CPU matmul at the model's shapes: bf16 %.0f vs fp32 %.0f GFLOP/s)",
             choice, bf16, fp32)
    return choice


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
