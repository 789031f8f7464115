"""model/training/precision.py: ``trainer.precision: auto`` picks bf16 only where it is measured faster."""

import logging

import pytest
import torch

import model.training.precision as precision


def test_cpu_choice_follows_the_measured_speed(monkeypatch, caplog):
    speeds = {torch.float32: 200.0, torch.bfloat16: 900.0}  # a CPU with AMX
    monkeypatch.setattr(precision, "matmul_gflops", lambda dtype: speeds[dtype])
    with caplog.at_level(logging.INFO, logger="model.training.precision"):
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


def test_the_probe_measures_both_precisions():
    fp32, bf16 = precision.matmul_gflops(torch.float32, 256, 64, 128, 2), precision.matmul_gflops(torch.bfloat16, 256, 64, 128, 2)
    assert fp32 > 0 and bf16 > 0
    assert precision.choose_precision(False) in ("bf16-mixed", "32-true")


def test_the_mfu_peak_reads_the_gpu_by_its_full_name():
    # A name that contains another (H200 NVL, GH200) is read as itself, not as the shorter one.
    assert precision.gpu_peak_flops("NVIDIA H200 NVL", "bf16-mixed") == 835e12
    assert precision.gpu_peak_flops("NVIDIA H200", "bf16-mixed") == 989e12
    assert precision.gpu_peak_flops("NVIDIA H100 NVL", "32-true") == 835e12 / 2  # fp32 on TF32: half the rate
    assert precision.gpu_peak_flops("NVIDIA GeForce RTX 4090", "bf16-mixed") == 165.2e12  # fp32 accumulation
    assert precision.gpu_peak_flops("Some Future GPU", "bf16-mixed") is None
