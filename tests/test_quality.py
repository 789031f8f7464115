"""model/scoring/time_to_quality.py and test_report.py: when validation BLEU first reached each mark, kept across a
resume, and the test report written into the run folder."""

import json

import lightning as L
import pytest
import torch

from helpers import small_datamodule, small_model
from model.search import SearchConfig
from model.scoring.time_to_quality import QualityMarks
from model.training.schedule import budget_schedule
from model.scoring.test_report import TestReport
from model.training.translation_module import TranslationModule


@pytest.fixture(scope="module")
def datamodule(tmp_path_factory):
    return small_datamodule(tmp_path_factory.mktemp("data"))


def test_the_first_time_validation_bleu_reaches_a_mark_is_kept(datamodule, tmp_path, caplog):
    module = TranslationModule(small_model(datamodule), lambda params: torch.optim.AdamW(params, lr=1e-2),
                               budget_schedule(4, "inverse_sqrt"), SearchConfig(beam_size=1, max_len_a=1.0, max_len_b=3),
                               val_bleu_samples=10)
    marks = QualityMarks(marks=(0, 1000))  # 0: reached at the first validation
    trainer = L.Trainer(max_steps=6, val_check_interval=3, check_val_every_n_epoch=None, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=str(tmp_path), callbacks=[marks])
    with caplog.at_level("INFO", logger="model.scoring.time_to_quality"):
        trainer.fit(module, datamodule=datamodule)
    assert float(trainer.callback_metrics["val/minutes"]) > 0  # beside val/bleu at every validation
    step, minutes = marks.reached["0"]
    assert step == 3 and 0 < minutes < 10 and "1000" not in marks.reached  # the first crossing, not the last
    assert "validation BLEU reached 0 at step 3" in caplog.text
    resumed = QualityMarks()  # a resumed run still knows, from its checkpoint
    resumed.load_state_dict(marks.state_dict())
    assert resumed.reached == marks.reached
    trainer.callbacks.append(TestReport())  # the callback writes what the module scored
    trainer.test(module, datamodule=datamodule)
    written = json.loads((tmp_path / "test_metrics.json").read_text())
    assert written["validation_bleu_reached"]["0"]["step"] == 3
    assert {"person", "number, 7 digits", "phone"} <= set(written["copied"])  # the copy check, every kind
    assert all(0 <= share <= 1 for share in written["copied"].values())
    short = written["fragments"]  # the split's short text, scored beside its sentences
    assert short["fragments"] == sum(kind["fragments"] for kind in short["by_kind"].values()) > 0
    assert 0 <= short["exact_match"] <= 1 and short["chrf"] >= 0 and "phrase" in short["examples"]
    assert short["labels"]["fragments"] == 67 and 0 <= short["labels"]["exact_match"] <= 1  # data/labels/en-es.tsv
    assert (tmp_path / "test_translations.tsv").read_text().count("\n") == len(module.test_results["test"][0])
