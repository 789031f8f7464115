"""train.py and configs/: presets compose, a smoke run end to end, resume, DDP, determinism."""

import csv
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from conftest import ROOT, run_train
from model.translator import inverse_sqrt_schedule, label_smoothed_loss


def compose_train(overrides):
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose(config_name="train", overrides=overrides, return_hydra_config=True)


@pytest.mark.parametrize("overrides", [[], ["experiment=smoke"], ["experiment=gpu_base"], ["trainer=ddp"],
                                       ["logger=csv"], ["logger=tensorboard"], ["data=opus_books"]])
def test_every_preset_composes(overrides):
    cfg = compose_train(overrides)
    assert cfg.model._target_ == "model.transformer.Seq2SeqTransformer"
    assert cfg.trainer._target_ == "lightning.pytorch.Trainer"
    if overrides == ["experiment=gpu_base"]:
        assert cfg.model.d_model == 512 and cfg.trainer.precision == "bf16-mixed"
    if overrides == ["trainer=ddp"]:
        assert cfg.trainer.strategy == "ddp"


def test_unknown_key_fails_with_hydras_error():
    with pytest.raises(ConfigCompositionException, match="optim.lerning_rate"):
        compose_train(["optim.lerning_rate=0.1"])
    result = subprocess.run([os.sys.executable, "train.py", "model.d_modle=64"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0 and "d_modle" in result.stderr


def test_schedule_and_loss_helpers():
    factor = inverse_sqrt_schedule(100)
    assert factor(50) == pytest.approx(0.5) and factor(100) == pytest.approx(1.0)
    assert factor(400) == pytest.approx(0.5)
    logits, target = torch.randn(2, 5, 11), torch.randint(0, 11, (2, 5))
    real = target != 0
    loss, nll, _ = label_smoothed_loss(logits[real], target[real], smoothing=0.1)
    expected = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, ignore_index=0, label_smoothing=0.1)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, torch.nn.functional.cross_entropy(logits[real], target[real]))


def read_losses(run_dir: Path) -> list[float]:
    with open(next(run_dir.glob("csv/version_*/metrics.csv"))) as f:
        return [float(row["train/loss"]) for row in csv.DictReader(f) if row.get("train/loss")]


def final_step(run_dir: Path) -> int:
    return torch.load(run_dir / "checkpoints" / "final.ckpt", weights_only=True)["global_step"]


def test_smoke_run_end_to_end(smoke_run):
    losses = read_losses(smoke_run)
    assert losses[-1] < losses[0]
    for name in ("tokenizer.json", "config.yaml", "checkpoints/last.ckpt", "checkpoints/best.ckpt",
                 "checkpoints/final.ckpt", "test_metrics.json", "test_translations.tsv"):
        assert (smoke_run / name).is_file(), name
    assert final_step(smoke_run) == 60
    # PNGs in the run folder, from the last validation too.
    steps = sorted(p.name for p in (smoke_run / "attention").iterdir())
    assert steps[-1] == "step_000060"
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert (smoke_run / "attention" / steps[-1] / f"{kind}_sentence0.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The offline wandb run holds the attention panels and the translation table.
    media = next(smoke_run.glob("wandb/offline-run-*/files/media"))
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert list((media / "images" / "attention" / kind).glob("sentence_0_*.png"))
    assert list((media / "table" / "val").glob("translations_*.table.json"))


def test_same_seed_same_losses(smoke_run, tmp_path, data_cache):
    run_train(tmp_path / "again", data_cache, "logger=csv", "test=false")
    assert read_losses(tmp_path / "again") == read_losses(smoke_run)


def test_killed_run_resumes_from_last_checkpoint(tmp_path, data_cache, smoke_run):
    run_dir = tmp_path / "killed"
    last = run_dir / "checkpoints" / "last.ckpt"
    args = ("logger=csv", "test=false", "trainer.max_steps=60")
    process = run_train(run_dir, data_cache, *args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not last.is_file() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)  # a real kill: no clean-up code runs
    process.wait()
    assert last.is_file() and not (run_dir / "checkpoints" / "final.ckpt").exists(), "not killed mid-way"
    killed_at = torch.load(last, weights_only=True)["global_step"]
    assert 0 < killed_at < 60
    result = run_train(run_dir, data_cache, *args)  # same folder, no ckpt_path: resumes by itself
    assert "resuming the interrupted run" in result.stderr + result.stdout
    assert final_step(run_dir) == final_step(smoke_run) == 60


def test_ddp_with_two_cpu_processes(tmp_path, data_cache):
    run_dir = tmp_path / "ddp"
    run_train(run_dir, data_cache, "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
              "logger=csv", "test=false", "trainer.max_steps=20", "trainer.val_check_interval=10")
    assert final_step(run_dir) == 20
