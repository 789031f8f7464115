"""scripts/gpu_check.sh answers with one JSON whatever happens: here, on the CPU, with a run that fails
and a run cut short by its timeout; scripts/gpu_check_report.py reads what the runs left behind."""

import json
import os
import subprocess

import pytest

from gpu_check_report import report, verdicts
from helpers import ROOT
from scripts.step_probe import busy_microseconds


def check(tmp_path, data_cache, *overrides: str, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``bash scripts/gpu_check.sh CHECK_DIR experiment=smoke OVERRIDES``, and the JSON it printed last."""
    folder = tmp_path / "check"
    result = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(folder), "experiment=smoke",
                             f"data.cache_dir={data_cache}", *overrides], cwd=ROOT, capture_output=True, text=True,
                            timeout=300, env=os.environ | {"MINUTES": "1"} | env)
    printed = result.stdout[result.stdout.index("== 4."):]
    figures = json.loads(printed[printed.index("{"):])
    assert figures == json.loads((folder / "gpu_check.json").read_text())
    return result, figures


@pytest.mark.slow
def test_a_failing_run_still_gives_one_json(tmp_path, data_cache):
    result, figures = check(tmp_path, data_cache, "model.num_heads=3")  # refused before training starts
    assert "not divisible by model.num_heads=3" in result.stdout  # the check's own settings composed
    assert figures["exit_codes"] == {"cuda_tests": "skipped: no CUDA device", "train": "1",
                                     "double_batch": "skipped: no CUDA device"}
    assert figures["gpu"] is None and figures["minutes_of_training"] == 1.0
    assert figures["targets"] == dict.fromkeys(figures["targets"])  # nothing measured: every verdict null
    assert any("time_split.json" in line for line in figures["missing"])  # what the run did not write


@pytest.mark.slow
def test_a_run_cut_short_still_gives_one_json(tmp_path, data_cache):
    _, figures = check(tmp_path, data_cache, "trainer.max_steps=-1", TRAIN_TIMEOUT="3")
    assert figures["exit_codes"]["train"] == "124"  # timeout's word for a command it stopped
    assert all(verdict is None for verdict in figures["targets"].values()) and figures["missing"]


def test_the_report_reads_a_finished_run(tmp_path):
    run = tmp_path / "train"
    (run / "csv" / "version_0").mkdir(parents=True)
    (run / "time_split.json").write_text(json.dumps({"wall_s": 600, "steps": 9000, "share": {"steps": 0.93},
                                                     "tokens_per_s_steps": 4e5}))
    (run / "step_probe.json").write_text(json.dumps({"start_step": 200, "gpu_busy_share": 0.86,
                                                     "host_syncs_off_logging_steps": 0, "peak_memory_gib": 21.5}))
    (run / "test_metrics.json").write_text(json.dumps({"bleu": 56.1, "chrf": 71.0}))
    (run / "csv" / "version_0" / "metrics.csv").write_text(
        "step,train/loss,val/loss,val/bleu,val/minutes\n10,5.0,,,\n499,,2.5,40.0,1.5\n999,,2.1,50.5,3.0\n")
    figures = report(tmp_path, {"train": "0"}, 10)
    train = figures["train"]
    assert train["validation"] == [{"step": 499, "val_loss": 2.5, "val_bleu": 40.0, "minutes": 1.5},
                                   {"step": 999, "val_loss": 2.1, "val_bleu": 50.5, "minutes": 3.0}]
    assert (train["best_val_bleu"], train["final_val_bleu"], train["test_bleu"]) == (50.5, 50.5, 56.1)
    assert figures["targets"] == dict.fromkeys(figures["targets"], True) and figures["missing"] == []
    assert verdicts(train | {"gpu_busy_share": 0.5, "host_syncs_off_logging_steps": 3}) == {
        "steps >= 90% of the wall": True, "GPU busy >= 80% of a step": False,
        "no host sync off logging steps": False, "test BLEU >= 55": True}


def test_busy_time_counts_overlapping_kernels_once():
    assert busy_microseconds([(0, 10), (5, 15), (20, 30), (22, 25)]) == 25
    assert busy_microseconds([]) == 0


def test_the_step_probe_says_what_a_cpu_cannot_measure(tmp_path):
    import lightning as L
    import torch

    from helpers import small_datamodule, tiny_model
    from model.training.schedule import budget_schedule
    from scripts.step_probe import StepProbe
    from model.training.translation_module import TranslationModule

    datamodule = small_datamodule(tmp_path)
    module = TranslationModule(tiny_model(datamodule.src_vocab_size), lambda p: torch.optim.AdamW(p, lr=1e-3),
                               budget_schedule(warmup_steps=3), val_bleu_samples=4)
    trainer = L.Trainer(max_steps=12, limit_val_batches=0, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(tmp_path),
                        callbacks=[StepProbe(start_step=3, profile_steps=4, sync_steps=4)])
    trainer.fit(module, datamodule=datamodule)
    probe = json.loads((tmp_path / "step_probe.json").read_text())
    assert probe["profiled_steps"] == 4 and probe["steps_per_s"] > 0
    assert probe["gpu_busy_share"] == probe["host_syncs_off_logging_steps"] == "not measured: no CUDA device"


def test_the_callbacks_the_check_adds_are_found_as_train_py_finds_them():
    """train.py runs from the checkout, so Hydra imports ``scripts.step_probe`` from there."""
    import re

    from hydra.utils import get_class

    targets = set(re.findall(r"_target_:([\w.]+)", (ROOT / "scripts" / "gpu_check.sh").read_text()))
    assert targets == {"scripts.step_probe.StepProbe"} and all(get_class(target) for target in targets)
