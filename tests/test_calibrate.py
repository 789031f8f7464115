"""scripts/calibrate.py: the confidence marks of a run from before, set from its own validation split."""

import json
import shutil
from dataclasses import asdict

import pytest

from calibrate import main
from model.inference.run_folder import RunLoadError
from model.inference.translator import Translator


def test_a_run_without_marks_or_with_broken_ones_gets_them_from_its_validation_split(smoke_run, tmp_path, capsys):
    run = tmp_path / "run"  # a copy: the shared run stays as it is
    shutil.copytree(smoke_run, run, ignore=shutil.ignore_patterns("ctranslate2*", "wandb", "attention"))
    metrics = json.loads((run / "test_metrics.json").read_text())
    del metrics["confidence"]
    (run / "test_metrics.json").write_text(json.dumps(metrics))
    (run / "confidence.json").unlink()
    assert Translator.load(run).calibration is None  # a run from before: scores without marks
    (run / "confidence.json").write_text('{"check_below": -1.2, "wrong_')  # a file cut short: every entry refuses
    with pytest.raises(RunLoadError, match=r"unreadable calibration .*python scripts/calibrate.py"):  # and says
        Translator.load(run)  # how to write it again, which repairs it
    assert main([str(run), "--sentences", "40", "--test-sentences", "30"]) == 0
    calibration = json.loads((run / "confidence.json").read_text())
    assert calibration["check_below"] >= calibration["wrong_below"] and calibration["beam_size"] == 2
    assert calibration["combination"]["check_below"] >= calibration["combination"]["wrong_below"]  # beam 2: an agreement
    quality = json.loads((run / "test_metrics.json").read_text())["confidence"]
    assert quality["sentences"] == 30 and '"auroc_chrf_below_30"' in capsys.readouterr().out
    assert asdict(Translator.load(run).calibration) == calibration  # read back by every entry


def test_a_folder_that_is_no_run_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "nothing")])
    assert stop.value.code == 2 and "calibrate.py: " in capsys.readouterr().err
