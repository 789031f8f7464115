"""runtime/timing.py: the phase clock and the time split of a run."""

import lightning as L
import pytest
import torch

import runtime.timing as timing
from helpers import small_datamodule, tiny_model
from model.training.schedule import budget_schedule
from runtime.timing import PHASES, RunClock, TimeSplit, split_line
from model.training.translation_module import TranslationModule


class FakeTime:
    """``time.perf_counter`` that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake_time(monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    return clock


def test_phases_are_exclusive_and_the_rest_is_what_none_claimed(fake_time):
    clock = RunClock()
    fake_time.now += 2  # before any phase: the rest
    with clock.phase("data"):
        fake_time.now += 10
    for _ in range(3):
        clock.start("steps", settle=False)
        fake_time.now += 5
        clock.stop("steps")
        fake_time.now += 1  # between steps: the rest
    with clock.phase("validation"):
        fake_time.now += 4
        with clock.phase("views"):  # inside validation: the views', not validation's
            fake_time.now += 3
        with clock.phase("checkpoints"):
            fake_time.now += 2
        fake_time.now += 1
    split = clock.split(steps=3, tokens=3000)
    assert split["wall_s"] == 40
    assert split["seconds"] == {"data": 10, "steps": 15, "validation": 5, "views": 3,
                                "checkpoints": 2, "test": 0, "rest": 5}
    assert sum(split["share"].values()) == pytest.approx(1.0)
    assert split["tokens_per_s_steps"] == 200 and split["tokens_per_s_wall"] == 75
    assert split_line(split) == ("time split: 0.7 min = data 25.0% · steps 37.5% · validation 12.5% · views 7.5% · "
                             "checkpoints 5.0% · rest 12.5%; 3 steps, 200 tokens/s in steps, 75 over the wall time")


def test_a_phase_left_open_by_an_exception_is_closed(fake_time):
    clock = RunClock()
    with pytest.raises(RuntimeError):
        with clock.phase("test"):
            clock.start("checkpoints")  # never stopped: the exception leaves it open
            fake_time.now += 3
            raise RuntimeError
    fake_time.now += 1  # after the exception, no phase open: the rest
    assert clock.split()["seconds"] == {**dict.fromkeys(PHASES, 0), "checkpoints": 3, "rest": 1}
    with pytest.raises(ValueError, match="unknown phase 'nap'"):
        clock.start("nap")


def test_the_callback_times_steps_and_validation_and_counts_real_tokens(tmp_path, fake_time):
    datamodule = small_datamodule(tmp_path)
    module = TranslationModule(tiny_model(datamodule.src_vocab_size, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1),
                               lambda params: torch.optim.AdamW(params, lr=1e-2), budget_schedule(4, "inverse_sqrt"),
                               val_bleu_samples=4)

    class RealTokens(L.Callback):
        """Counts the real tokens; the (fake) clock moves 1 s inside each step, 5 s inside each validation."""
        count, validations = 0, 0

        def on_before_optimizer_step(self, *args) -> None:
            fake_time.now += 1

        def on_validation_epoch_end(self, *args) -> None:
            fake_time.now += 5
            self.validations += 1

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            self.count += int((batch["src"] != 0).sum() + (batch["tgt_out"] != 0).sum())

    clock, tokens = RunClock(), RealTokens()
    split = TimeSplit(clock)
    trainer = L.Trainer(max_steps=6, val_check_interval=3, check_val_every_n_epoch=None, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[split, tokens], default_root_dir=str(tmp_path))
    trainer.fit(module, datamodule=datamodule)
    report = split.report()
    assert report["steps"] == 6 and report["tokens"] == tokens.count > 0
    assert tokens.validations >= 2  # at steps 3 and 6 (and an epoch's end)
    assert report["seconds"] == {**dict.fromkeys(PHASES, 0), "steps": 6, "validation": 5 * tokens.validations}
