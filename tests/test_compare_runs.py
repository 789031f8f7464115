"""Hydra sweeps (python train.py -m ...) and scripts/compare_runs.py on their runs."""

import csv
import os
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from helpers import NO_VIEWS, ROOT, compose_train
from scripts.compare_runs import find_runs, summarize, variants


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, data_cache):
    """Two smoke runs of one sweep, as a user starts them: one command, Hydra's multirun."""
    folder = tmp_path_factory.mktemp("sweeps") / "positions"
    command = [sys.executable, "train.py", "-m", "experiment=smoke", "model.positional=sinusoidal,none",
               f"hydra.sweep.dir={folder}", f"data.cache_dir={data_cache}", "trainer.max_steps=20",
               "trainer.val_check_interval=10", NO_VIEWS]  # short: the table reads what any run writes
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


def test_a_sweep_lands_in_one_folder_and_one_wandb_group(sweep):
    runs = find_runs([sweep])
    assert [run.name for run in runs] == ["0", "1"]
    configs = [OmegaConf.load(run / "config.yaml") for run in runs]
    assert [c.model.positional for c in configs] == ["sinusoidal", "none"]
    assert {c.logger.wandb.group for c in configs} == {str(sweep)}
    assert all((run / "test_metrics.json").is_file() and list(run.glob("wandb/offline-run-*")) for run in runs)


def test_compare_runs_makes_the_table_and_the_plot(sweep, tmp_path):
    result = subprocess.run([sys.executable, "scripts/compare_runs.py", str(sweep), "--out", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "comparison.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["variant"] for r in rows] == ["model.positional=sinusoidal", "model.positional=none"]
    assert all(r["steps"] == "20" and float(r["params (M)"]) > 0 and r["test BLEU"] != "" for r in rows)
    # No positions, no position table: the learned-free sinusoidal table is a buffer, so equal sizes.
    assert rows[0]["params (M)"] == rows[1]["params (M)"]
    assert "| model.positional=none |" in (tmp_path / "comparison.md").read_text()
    assert (tmp_path / "val_bleu.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Where each run's time went, from its time_split.json.
    table = (tmp_path / "time_split.md").read_text().splitlines()
    assert table[0].startswith("| variant | wall min | steps | validation | views | checkpoints |")
    assert len(table) == 4
    assert "where the wall time went:" in result.stdout and "| model.positional=none |" in table[3]


def test_variants_name_only_what_differs():
    configs = [{"model": {"d_model": 32, "num_heads": h}, "paths": {"output_dir": f"/x/{h}"}} for h in (1, 8)]
    assert variants(configs) == ["model.num_heads=1", "model.num_heads=8"]


def test_ablation_preset_and_slurm_launcher_compose():
    cfg = compose_train("experiment=ablation", "model.causal_decoder=false", "model.cross_attention=false",
                        "model.positional=none", "hydra/launcher=submitit_slurm")
    assert (cfg.model.d_model, cfg.trainer.max_steps, cfg.model.causal_decoder) == (128, 450, False)


def fake_run(folder, rows: list[dict], minutes_logged: bool):
    """A run folder as train.py leaves it, with validations at the given (step, BLEU, minutes)."""
    (folder / "csv" / "version_0").mkdir(parents=True)
    (folder / "config.yaml").write_text(OmegaConf.to_yaml(compose_train("experiment=smoke", "model.src_vocab_size=300",
                                                                        "model.tgt_vocab_size=300", "model.pad_id=0")))
    columns = ["step", "val/bleu"] + (["val/minutes"] if minutes_logged else [])
    with open(folder / "csv" / "version_0" / "metrics.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "last.ckpt").write_bytes(b"")
    os.utime(folder / "config.yaml", (0, 0))
    os.utime(folder / "checkpoints" / "last.ckpt", (600, 600))  # 10 minutes of training
    return folder


def test_time_to_quality_columns(tmp_path):
    rows = [{"step": 99, "val/bleu": 25.0, "val/minutes": 2.0}, {"step": 199, "val/bleu": 31.0, "val/minutes": 4.5},
            {"step": 299, "val/bleu": 41.0, "val/minutes": 7.25}, {"step": 399, "val/bleu": 39.0, "val/minutes": 9.0}]
    row, curve = summarize(fake_run(tmp_path / "logged", rows, True), "")
    assert (row["minutes to 30"], row["steps to 30"], row["minutes to 40"], row["steps to 40"]) == ("4.5", 200, "7.2", 300)
    assert curve[0] == (2.0, 25.0)
    row, _ = summarize(fake_run(tmp_path / "older", rows, False), "")  # no val/minutes: spread over 10 minutes
    assert (row["minutes to 30"], row["steps to 30"]) == ("~5.0", 200)
