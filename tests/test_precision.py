"""runtime/precision.py: ``runtime.precision: auto`` picks bf16 only where it is native and measured faster
(fp16 with a scaler on a GPU with fp16 tensor cores only); the name of the machine beside every figure."""

import logging
import os
from pathlib import Path

import pytest
import torch

import runtime.precision as precision


def test_cpu_choice_follows_the_measured_speed(monkeypatch, caplog):
    speeds = {torch.float32: 200.0, torch.bfloat16: 900.0}  # a CPU with AMX
    monkeypatch.setattr(precision, "matmul_gflops", lambda dtype: speeds[dtype])
    with caplog.at_level(logging.INFO, logger="runtime.precision"):
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
