"""runtime/precision.py: ``runtime.precision: auto`` picks bf16 only where it is measured faster; the peak
FLOP/s MFU is measured against; the name of the machine beside every figure."""

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


def test_gpu_choice_needs_no_probe(monkeypatch):
    monkeypatch.setattr(precision, "matmul_gflops", lambda dtype: pytest.fail("no probe on a GPU"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "test GPU")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert precision.choose_precision(True) == "bf16-mixed"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert precision.choose_precision(True) == "32-true"


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


def test_the_mfu_peak_reads_every_gpu_of_the_table_as_itself():
    # A name that contains another (H200 NVL, GH200) must be read as itself, not as the shorter one.
    for name, tflops in precision.GPU_PEAK_BF16_TFLOPS.items():
        assert precision.gpu_peak_flops(f"NVIDIA {name}", "bf16-mixed") == tflops * 1e12, name
        assert precision.gpu_peak_flops(f"NVIDIA {name}", "32-true") == tflops * 1e12 / 2  # fp32 on TF32
    assert precision.gpu_peak_flops("Some Future GPU", "bf16-mixed") is None


def test_a_cpu_run_on_a_gpu_host_names_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *device: "NVIDIA H200")
    assert precision.machine_name("cuda") == "NVIDIA H200"
    cpu = precision.machine_name("cpu")
    assert "NVIDIA" not in cpu and cpu.endswith(f"{os.cpu_count()} cores)")
    model = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
             if line.startswith("model name")] if Path("/proc/cpuinfo").exists() else []
    assert not model or cpu.startswith(model[0])  # the CPU's own name, as the kernel reports it
