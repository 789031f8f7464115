"""runtime/machine.py: the machine decided once, and every component handed the same answer."""

import os

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

import runtime.precision as precision
from helpers import compose_train
from runtime.machine import decide_machine, settle_settings, with_recipe


def autos(node, path: str = "") -> list[str]:
    """The settings still set to ``auto`` (Lightning's own flags included)."""
    if isinstance(node, dict):
        return [found for key, value in node.items() for found in autos(value, f"{path}{key}.")]
    return [path.rstrip(".")] if node == "auto" else []


@pytest.fixture
def machine_with(monkeypatch):
    """Pretend this host has ``gpus`` CUDA devices (an H200 each) and a CPU where bf16 is 4x faster."""
    def pretend(gpus: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *device: "NVIDIA H200")
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
        monkeypatch.setattr(precision, "matmul_gflops", lambda dtype: 800.0 if dtype == torch.bfloat16 else 200.0)

    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield pretend
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


@pytest.mark.parametrize("gpus, overrides", [(1, []), (0, []), (2, ["trainer=ddp"]), (1, ["experiment=cpu",
                                                                                         "trainer.accelerator=cpu"])])
def test_one_decision_reaches_every_component(machine_with, gpus, overrides):
    machine_with(gpus)
    argv = with_recipe(overrides)  # what train.py's command line becomes before Hydra composes
    cfg = compose_train(*argv, "model.src_vocab_size=300", "model.tgt_vocab_size=300", "model.pad_id=0")
    machine = decide_machine(cfg, "gpu" if "experiment=gpu" in argv else "cpu")
    settle_settings(cfg, machine)
    gpu = gpus > 0 and "trainer.accelerator=cpu" not in overrides
    assert machine.gpu is gpu and machine.devices == (gpus if "trainer=ddp" in overrides else 1)
    assert autos(OmegaConf.to_container(cfg)) == []  # nothing downstream decides anything
    assert cfg.trainer.accelerator == ("gpu" if gpu else "cpu") and cfg.trainer.devices == machine.devices
    assert cfg.runtime.precision == "bf16-mixed"  # the GPU's, or the measured CPU's
    assert instantiate(cfg.data).hparams.on_device is gpu  # batches cut on the device
    assert instantiate(cfg.callbacks.attention_views).background is gpu  # views drawn beside training
    assert cfg.runtime.asynchronous_checkpoints is gpu  # checkpoints written beside training
    assert (cfg.runtime.last_every_minutes is not None) is gpu  # the GPU recipe's timed last.ckpt
    if gpu:
        assert machine.line() == (f"machine: {'2 × ' if gpus == 2 else ''}NVIDIA H200; recipe: experiment=gpu "
                                  f"(experiment=cpu forces the CPU recipe)")
    else:  # the CPU it trains on, also on a host with a GPU
        assert machine.line().endswith("; recipe: experiment=cpu (experiment=gpu forces the GPU recipe)")
        assert "NVIDIA" not in machine.line() and f"{os.cpu_count()} cores" in machine.line()


def test_fp32_on_a_gpu_runs_on_tf32(machine_with):
    machine_with(1)
    cfg = compose_train("experiment=gpu", "runtime.precision=32-true")
    settle_settings(cfg, decide_machine(cfg, "gpu"))
    assert torch.backends.cuda.matmul.allow_tf32 is True


def test_the_recipe_is_chosen_before_composing_unless_the_command_decides():
    assert with_recipe(["logger=csv"], cuda=True) == ["logger=csv", "experiment=gpu"]
    assert with_recipe(["logger=csv"], cuda=False) == ["logger=csv"]
    assert with_recipe(["experiment=cpu"], cuda=True) == ["experiment=cpu"]
    assert with_recipe(["trainer.accelerator=cpu"], cuda=True) == ["trainer.accelerator=cpu"]
