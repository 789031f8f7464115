"""runtime/machine.py: the machine decided once, and every component handed the same answer; ``runtime.precision:
auto`` picks bf16 only where it is native and measured faster (fp16 with a scaler on a GPU with fp16 tensor cores
only); the name of the machine beside every figure."""

import logging
import os
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

import runtime.machine as precision
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
                                                                                         "trainer.accelerator=cpu"]),
                                             (1, ["averaging=ema"]), (0, ["averaging=ema"])])
def test_one_decision_reaches_every_component(machine_with, gpus, overrides):
    machine_with(gpus)
    argv = with_recipe(overrides)  # what train.py's command line becomes before Hydra composes
    cfg = compose_train(*argv, "model.src_vocab_size=300", "model.tgt_vocab_size=300", "model.pad_id=0")
    machine = decide_machine(cfg, "gpu" if "experiment=gpu" in argv else "cpu")
    settle_settings(cfg, machine)
    gpu = gpus > 0 and "trainer.accelerator=cpu" not in overrides
    assert machine.gpu is gpu and machine.devices == (gpus if "trainer=ddp" in overrides else 1)
    # Nothing downstream decides anything of the machine (the corpus's format is the corpus's to say).
    assert autos(OmegaConf.to_container(cfg)) == ["data.corpus_format"]
    assert cfg.trainer.accelerator == ("gpu" if gpu else "cpu") and cfg.trainer.devices == machine.devices
    assert cfg.runtime.precision == "bf16-mixed"  # the GPU's, or the measured CPU's
    assert instantiate(cfg.data).hparams.on_device is gpu  # batches cut on the device
    assert instantiate(cfg.callbacks.attention_views).background is gpu  # views drawn beside training
    assert cfg.runtime.asynchronous_checkpoints is gpu  # checkpoints written beside training
    assert (cfg.runtime.last_every_minutes is not None) is gpu  # the GPU recipe's timed last.ckpt
    if "averaging=ema" in overrides:  # the average kept where the weights train
        assert str(instantiate(cfg.callbacks.weight_averaging)._device) == ("cuda" if gpu else "cpu")
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


def test_cpu_choice_follows_the_measured_speed(monkeypatch, caplog):
    speeds = {torch.float32: 200.0, torch.bfloat16: 900.0}  # a CPU with AMX
    monkeypatch.setattr(precision, "matmul_gflops", lambda dtype: speeds[dtype])
    with caplog.at_level(logging.INFO, logger="runtime.machine"):
        assert precision.choose_precision(False) == "bf16-mixed"
    assert "bf16 900 vs fp32 200 GFLOP/s" in caplog.text
    speeds[torch.bfloat16] = 20.0  # a CPU that emulates bf16
    assert precision.choose_precision(False) == "32-true"
    speeds[torch.bfloat16] = 220.0  # a small win does not pay for autocast's casts
    assert precision.choose_precision(False) == "32-true"


@pytest.mark.parametrize("native_bf16, capability, choice", [(True, (9, 0), "bf16-mixed"),  # H100, H200
                                                              (False, (7, 5), "16-mixed"),  # T4: emulated bf16
                                                              (False, (6, 1), "32-true")])  # no tensor cores
def test_gpu_choice_is_native_bf16_else_fp16_on_tensor_cores_else_fp32(monkeypatch, native_bf16, capability, choice):
    monkeypatch.setattr(precision, "matmul_gflops", lambda dtype: pytest.fail("no probe on a GPU"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "test GPU")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda: capability)
    # torch's own answer counts an emulated bf16 (T4, V100) unless asked not to
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: native_bf16 or including_emulation)
    assert precision.choose_precision(True) == choice


def test_the_probe_is_the_matmul_flops_over_the_time_it_took(monkeypatch):
    class Seconds:  # each reading of the clock is half a second later: the timed matmuls take exactly 0.5 s
        now = 0.0

        def perf_counter(self) -> float:
            self.now += 0.5
            return self.now

    monkeypatch.setattr(precision, "time", Seconds())
    rows, inner, cols, repeats = 96, 32, 48, 3  # shapes of this test alone (the probe is cached per shape)
    for dtype in (torch.float32, torch.bfloat16):
        assert precision.matmul_gflops(dtype, rows, inner, cols, repeats) == 2 * rows * inner * cols * repeats / 0.5e9


def test_a_cpu_run_on_a_gpu_host_names_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *device: "NVIDIA H200")
    assert precision.machine_name("cuda") == "NVIDIA H200"
    cpu = precision.machine_name("cpu")
    assert "NVIDIA" not in cpu and cpu.endswith(f"{os.cpu_count()} cores)")
    model = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
             if line.startswith("model name")] if Path("/proc/cpuinfo").exists() else []
    assert not model or cpu.startswith(model[0])  # the CPU's own name, as the kernel reports it
