"""The machine a run trains on, decided once: GPU or CPU, how many devices, which recipe. Every ``auto`` in
``configs/`` is settled here into plain values, so the components downstream never look at CUDA themselves."""

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from omegaconf import DictConfig, open_dict

from runtime.precision import choose_precision, machine_name


@dataclass(frozen=True)
class Machine:
    """Where training runs: on CUDA GPUs or the CPU, on how many devices, under which recipe."""

    gpu: bool
    devices: int
    name: str  # the GPU, or the CPU with the extensions that decide its speed
    recipe: str  # the experiment preset composed ("cpu": the composed defaults)

    @property
    def device_type(self) -> str:
        return "cuda" if self.gpu else "cpu"

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
        if cfg.runtime.precision == "auto":  # bf16 only where it is faster (precision.py)
            cfg.runtime.precision = choose_precision(machine.gpu)
        if cfg.data.get("on_device", False) == "auto":  # token ids on the GPU, batches cut there
            cfg.data.on_device = machine.gpu
        if cfg.runtime.asynchronous_checkpoints == "auto":  # a host copy, then the write beside training
            cfg.runtime.asynchronous_checkpoints = machine.gpu
        if (views := cfg.get("callbacks", {}).get("attention_views")) is not None and views.get("background") == "auto":
            views.background = machine.gpu  # views drawn beside training: a CPU's cores are all training's
    if machine.gpu and cfg.runtime.precision in ("32-true", "32", 32):  # TF32 tensor cores: ~8x, 10-bit mantissa
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
