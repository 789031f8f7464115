"""runtime/timing.py: the phase clock, the time split of a run, and the FLOPs behind MFU."""

import lightning as L
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import runtime.timing as timing
from helpers import small_datamodule, tiny_model
from model.training.schedule import inverse_sqrt_schedule
from runtime.timing import PHASES, RunClock, TimeSplit, Work, attention_macs, dense_macs_per_token
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
    report = clock.split(Work(steps=3, tokens=3000, flops=6e12), peak_flops=1e12)
    assert report.total_s == 40
    assert report.seconds == {"data": 10, "steps": 15, "validation": 5, "views": 3, "checkpoints": 2, "test": 0,
                              "rest": 5}
    split = report.as_dict()
    assert sum(split["share"].values()) == pytest.approx(1.0)
    assert split["tokens_per_s_steps"] == 200 and split["tokens_per_s_wall"] == 75
    assert split["mfu"] == pytest.approx(6e12 / 15 / 1e12)
    line = report.line()
    assert line.startswith("time split: 0.7 min = data 25.0% · steps 37.5% · validation 12.5% · views 7.5%") and "MFU 40.0%" in line


def test_a_phase_left_open_by_an_exception_is_closed(fake_time):
    clock = RunClock()
    with pytest.raises(RuntimeError):
        with clock.phase("test"):
            clock.start("checkpoints")  # never stopped: the exception leaves it open
            fake_time.now += 3
            raise RuntimeError
    fake_time.now += 1
    assert clock.split().seconds["checkpoints"] == 3 and clock.seconds["rest"] == 0
    with pytest.raises(ValueError, match="unknown phase 'nap'"):
        clock.start("nap")


def test_the_flop_count_equals_torchs_flop_counter():
    """Forward FLOPs of a padding-free batch, counted by torch's FlopCounterMode on the explicit attention path."""
    model = tiny_model(50, d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=3, d_ff=48).train()
    for module in model.modules():
        if hasattr(module, "fused"):
            module.fused = False  # matmuls torch can count
    batch, src_len, tgt_len = 3, 7, 5
    src, tgt = torch.randint(3, 50, (batch, src_len)), torch.randint(3, 50, (batch, tgt_len))
    with FlopCounterMode(display=False) as counter:
        model(src, tgt, output_mask=torch.ones(batch, tgt_len, dtype=torch.bool))
    per_source, per_target = dense_macs_per_token(model)
    macs = per_source * batch * src_len + per_target * batch * tgt_len + attention_macs(model, batch, src_len, tgt_len)
    assert counter.get_total_flops() == 2 * macs


def test_the_callback_times_steps_and_validation_and_counts_real_tokens(tmp_path):
    datamodule = small_datamodule(tmp_path)
    module = TranslationModule(tiny_model(datamodule.src_vocab_size, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1),
                               lambda params: torch.optim.AdamW(params, lr=1e-2), inverse_sqrt_schedule(4),
                               val_bleu_samples=4)

    class RealTokens(L.Callback):
        count = 0

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            self.count += int((batch["src"] != 0).sum() + (batch["tgt_out"] != 0).sum())

    clock, tokens = RunClock(), RealTokens()
    split = TimeSplit(clock)
    trainer = L.Trainer(max_steps=6, val_check_interval=3, check_val_every_n_epoch=None, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[split, tokens], default_root_dir=str(tmp_path))
    trainer.fit(module, datamodule=datamodule)
    work = split.work()
    assert work.steps == 6 and work.tokens == tokens.count
    per_source, per_target = dense_macs_per_token(module.model)
    assert work.flops > 6 * per_target * tokens.count / 2  # at least the dense part of the target half
    report = clock.split(work)
    assert set(report.seconds) == set(PHASES)
    assert report.seconds["steps"] > 0 and report.seconds["validation"] > 0
    assert report.as_dict()["mfu"] is None  # no peak given
