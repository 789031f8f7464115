"""model/training/translation_module.py: the loss, the injected optimizer and schedule, gradient
clipping in bf16, validation BLEU through the one search entry point, the sentences it hands
to the attention views, and no read of the device off logging steps. (Its non-finite guard:
test_non_finite.py; time to quality and the test report: test_quality.py.)"""

import os
import sys

import lightning as L

import pytest
import torch
import torch.nn.functional as F

from helpers import small_datamodule, small_model
from model.search import SearchConfig, search, sentence_attention
from model.training.metrics import corpus_scores
from model.training.quality import ScoredEarlyStopping
from model.training.schedule import budget_schedule
from model.training.translation_module import TranslationModule, label_smoothed_loss
import runtime.stop_and_clock as stop_and_clock
from runtime.stop_and_clock import StopAndClock


def test_label_smoothed_loss_equals_torch_cross_entropy():
    logits, target = torch.randn(2, 5, 11), torch.randint(0, 11, (2, 5))
    real = target != 0
    loss, nll, accuracy = label_smoothed_loss(logits[real], target[real], smoothing=0.1)
    expected = F.cross_entropy(logits.transpose(1, 2), target, ignore_index=0, label_smoothing=0.1)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, F.cross_entropy(logits[real], target[real]))
    assert accuracy == (logits[real].argmax(-1) == target[real]).float().mean()
    # The GPU's form: every row, the padding weighted out (no indexing by the mask): the same numbers.
    weighted = label_smoothed_loss(logits.flatten(0, 1), target.flatten(), 0.1, real.flatten())
    for a, b in zip(weighted, (loss, nll, accuracy)):
        torch.testing.assert_close(a, b)


@pytest.fixture(scope="module")
def datamodule(tmp_path_factory):
    return small_datamodule(tmp_path_factory.mktemp("data"))


class LearningRates(L.Callback):
    """The learning rate each update used."""

    def __init__(self) -> None:
        self.used: list[float] = []

    def on_train_batch_start(self, trainer, *args) -> None:
        self.used.append(trainer.optimizers[0].param_groups[0]["lr"])


class Clock(L.Callback):
    """A stand-in for the run's clock: one second passes per training batch, however loaded the
    machine is (``time.perf_counter`` of runtime/stop_and_clock.py)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def on_train_batch_start(self, *args) -> None:
        self.now += 1.0


def fit_with_budget(datamodule, *callbacks: L.Callback, time_budget=None, **budget) -> LearningRates:
    """Fit the tiny model under the budget schedule (warm-up 2 steps, peak 1e-2) for ``budget`` (and the
    run machinery's ``time_budget``, when given)."""
    rates = LearningRates()
    module = TranslationModule(small_model(datamodule), lambda params: torch.optim.AdamW(params, lr=1e-2),
                               budget_schedule(2), time_budget=time_budget)
    trainer = L.Trainer(**budget, limit_val_batches=0, logger=False, enable_checkpointing=False,
                        callbacks=[rates, *callbacks], enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, datamodule=datamodule)
    rates.used.append(trainer.optimizers[0].param_groups[0]["lr"])  # what a next step would get
    return rates


def test_learning_rate_decays_to_zero_when_the_step_budget_is_spent(datamodule):
    used = fit_with_budget(datamodule, max_steps=8).used
    expected = [1e-2 * budget_schedule(2)(step, step / 8) for step in range(9)]
    assert used == pytest.approx(expected) and used[-1] == 0.0


@pytest.mark.parametrize("log_every", [1, 4])
def test_learning_rate_decays_to_zero_when_the_time_budget_is_spent(datamodule, monkeypatch, log_every):
    clock = Clock()  # 1 s per batch: a 10-second budget is 10 steps on any machine
    monkeypatch.setattr(stop_and_clock, "time", clock)
    budget = StopAndClock(max_time="00:00:00:10")
    used = fit_with_budget(datamodule, clock, budget, time_budget=budget.budget, max_steps=100_000,
                           log_every_n_steps=log_every).used
    # The clock is read at logging steps; between them every rank extrapolates at the last pace (here
    # exact: 1 s a step), so step s spends s of the 10 seconds, and training stops after step 10.
    first_reading = [1e-2 * budget_schedule(2)(step, step / 100_000) for step in range(log_every + 1)]  # max_steps
    expected = first_reading + [1e-2 * budget_schedule(2)(step, step / 10) for step in range(log_every + 1, 11)]
    assert len(used) == 11 and used == pytest.approx(expected) and used[-1] == 0.0  # zero exactly when the time is up
    assert budget.stop_step == 10


@pytest.mark.parametrize("machinery, precision", [(False, "32-true"), (True, "bf16-mixed"), (True, "16-mixed")])
def test_gradients_are_clipped_alone_and_under_autocast_with_a_fused_optimizer(datamodule, machinery, precision):
    # Alone, the module clips as Lightning does (fp32). Under bf16 autocast there is no loss scaler: the gradients
    # are true and the guard clips them (Lightning's plugin refuses to, with a fused AdamW). Under fp16 the scaler
    # leaves a fused AdamW's gradients scaled (it unscales in its step): the module unscales them before the guard
    # clips. Lightning runs fp16 on a GPU only, so here its fp16 plugin is given a CPU autocast and scaler.
    from lightning.pytorch.plugins.precision import MixedPrecision

    from runtime.non_finite import NonFiniteGuard

    norms = []

    class Recorder(L.Callback):
        """The norm of the gradients each update used (Lightning runs backward and clipping inside
        ``optimizer.step``; the gradients stay until the next step's zero_grad)."""

        def on_train_start(self, trainer, module) -> None:
            def record(*_) -> None:
                grads = [p.grad.float() for p in module.parameters() if p.grad is not None]
                norms.append(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item())

            trainer.optimizers[0].register_step_post_hook(record)

    module = TranslationModule(small_model(datamodule),
                               lambda params: torch.optim.AdamW(params, lr=1e-2, fused=machinery),
                               budget_schedule(2), guard=NonFiniteGuard() if machinery else None)
    before = [p.detach().clone() for p in module.parameters()]
    fp16 = MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu"))  # what 16-mixed is on a GPU
    trainer = L.Trainer(max_steps=3, gradient_clip_val=0.01, limit_val_batches=0, logger=False,
                        **({"plugins": [fp16]} if precision == "16-mixed" else {"precision": precision}),
                        enable_checkpointing=False, callbacks=[Recorder()], enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(module, datamodule=datamodule)
    assert len(norms) == 3 and all(n <= 0.01 * 1.001 for n in norms), norms  # true gradients, clipped every update
    assert any(not torch.equal(a, b) for a, b in zip(before, module.parameters()))  # and the weights moved


@pytest.fixture(scope="module")
def trained(datamodule, tmp_path_factory):
    """A tiny model fitted for 6 steps on a generated corpus, validating at the end."""
    folder = tmp_path_factory.mktemp("module")
    model = small_model(datamodule)
    module = TranslationModule(model, lambda params: torch.optim.AdamW(params, lr=1e-2), budget_schedule(4, "inverse_sqrt"),
                               SearchConfig(beam_size=2, max_len_a=1.0, max_len_b=3), val_bleu_samples=10)
    trainer = L.Trainer(max_steps=6, val_check_interval=6, check_val_every_n_epoch=None, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(folder),
                        log_every_n_steps=3)  # training metrics are read at logging steps only
    trainer.fit(module, datamodule=datamodule)
    return trainer, module, datamodule


def test_inputs_are_read_once_in_setup(trained):
    _, module, datamodule = trained
    assert module.tokenizer is datamodule.tokenizer
    assert module.texts["validation"] == (datamodule.sources("validation"), datamodule.references("validation"))
    texts, ids = module.texts["validation"][0], datamodule.splits["validation"]["src_ids"]
    readable = [(t, i) for t, i in zip(texts, ids) if 5 <= len(i) <= 12]
    assert module.readable_sources == (readable or list(zip(texts, ids)))  # none of 5-12 tokens: any sentence


def test_injected_optimizer_and_schedule_are_used(trained):
    trainer, _, _ = trained
    optimizer, scheduler = trainer.optimizers[0], trainer.lr_scheduler_configs[0].scheduler
    assert isinstance(optimizer, torch.optim.AdamW)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * budget_schedule(4, "inverse_sqrt")(6))
    assert scheduler.last_epoch == 6


def test_validation_bleu_is_greedy_search_on_the_fixed_subset(trained):
    trainer, module, datamodule = trained
    module.eval()
    greedy = SearchConfig(beam_size=1, max_len_a=1.0, max_len_b=3)
    hypotheses = {}
    for batch in datamodule.val_dataloader():  # the same batches, the subset of rows 0-9
        chosen = batch["index"] < 10
        if chosen.any():
            outputs = [o.ids for o in search(module.model, batch["src"][chosen], 1, 2, greedy)]
            hypotheses.update(zip(batch["index"][chosen].tolist(), datamodule.tokenizer.decode_tgt(outputs)))
    assert sorted(hypotheses) == list(range(10))
    references = datamodule.references("validation")
    expected = corpus_scores([hypotheses[i] for i in range(10)], [references[i] for i in range(10)])
    assert float(trainer.callback_metrics["val/bleu"]) == pytest.approx(expected.bleu, abs=1e-4)
    assert {"train/loss", "train/ppl", "train/accuracy", "train/lr", "val/loss", "val/chrf"} <= set(
        trainer.callback_metrics)


def test_sentence_views_are_the_readable_validation_sentences_as_translated_now(trained):
    _, module, datamodule = trained
    module.eval()
    tok = datamodule.tokenizer
    views = module.sentence_views(2)
    assert [(v.source, v.attention.src_ids) for v in views] == module.readable_sources[:2]
    for view in views:
        src = torch.tensor([view.attention.src_ids])
        output_ids = search(module.model, src, tok.bos_id, tok.eos_id, SearchConfig(beam_size=1, max_len_a=1.0,
                                                                                       max_len_b=3))[0].ids
        assert view.attention.output_ids == output_ids
        assert view.translation == tok.decode_tgt([output_ids], [view.source])[0]  # slots filled from the source
        expected = sentence_attention(module.model, view.attention.src_ids, output_ids, tok.bos_id)
        torch.testing.assert_close(view.attention.maps.cross[0], expected.maps.cross[0])
        assert (view.src_tokens, view.output_tokens) == (tok.src_tokens(expected.src_ids), tok.tgt_tokens(output_ids))


class HostReads(L.Callback):
    """Counts every tensor-to-Python conversion (``item``, ``tolist``, ``bool()``, ``float()``, ``int()``)
    by the training step it happens in: on a GPU each of them waits for the device. The sampler's
    shuffle at the start of an epoch is left out: its tensors are made on the host, for the host."""

    NAMES = ("item", "tolist", "__bool__", "__float__", "__int__")

    def __init__(self, monkeypatch) -> None:
        self.by_step: dict[int, int] = {}
        self.trainer = None
        for name in self.NAMES:
            real = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, self._counted(real))

    def _counted(self, real):
        def counted(tensor, *args, **kwargs):
            if self.trainer is not None and self.trainer.training and not self._in_sampler():
                step = self.trainer.fit_loop.epoch_loop._batches_that_stepped  # the batch being trained
                self.by_step[step] = self.by_step.get(step, 0) + 1
            return real(tensor, *args, **kwargs)
        return counted

    @staticmethod
    def _in_sampler() -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename.endswith(os.path.join("data", "sampler.py")):
                return True
            frame = frame.f_back
        return False

    def on_train_start(self, trainer, *args) -> None:
        self.trainer = trainer

    def on_train_end(self, trainer, *args) -> None:
        self.trainer = None


def test_no_training_step_reads_the_device_outside_logging_steps(datamodule, tmp_path, monkeypatch):
    from model.views.callback import AttentionViews
    from model.training.quality import TrainingProgressBar
    from runtime.non_finite import NonFiniteGuard
    from runtime.timing import RunClock, TimeSplit

    guard = NonFiniteGuard()  # the run machinery as train.py attaches it
    stop = StopAndClock("00:01:00:00", last_every_n_steps=5, last_every_minutes=60, guard=guard)
    module = TranslationModule(small_model(datamodule), lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True),
                               budget_schedule(warmup_steps=3), SearchConfig(beam_size=2), val_bleu_samples=4,
                               guard=guard, time_budget=stop.budget, alignment_weight=0.05)  # the aligned head too
    monkeypatch.setitem(datamodule.hparams, "on_device", True)  # the GPU's path: batches cut on the device
    reads = HostReads(monkeypatch)
    callbacks = [TimeSplit(RunClock()), reads, AttentionViews(sentences=1),
                 TrainingProgressBar(refresh_rate=1),  # refreshes at every step: must not read the device
                 stop]
    trainer = L.Trainer(max_steps=14, limit_val_batches=0, log_every_n_steps=5,
                        gradient_clip_val=1.0, logger=L.pytorch.loggers.CSVLogger(tmp_path), callbacks=callbacks,
                        enable_checkpointing=False,  # Lightning's own checkpoint callback: last.ckpt is ours
                        enable_model_summary=False, default_root_dir=str(tmp_path))
    trainer.fit(module, datamodule=datamodule)
    assert trainer.global_step == 14 and trainer.current_epoch >= 1  # across an epoch boundary too
    logging_steps = {4, 9}  # Lightning logs after the 5th and 10th update (and checkpoints there)
    assert reads.by_step and set(reads.by_step) <= logging_steps, reads.by_step
    assert module.progress_metrics["loss"] > 0  # the bar shows the loss read at the last logging step


def test_bleu_at_every_second_validation_and_the_loss_at_every_one(datamodule, tmp_path, monkeypatch):
    module = TranslationModule(small_model(datamodule), lambda params: torch.optim.AdamW(params, lr=1e-2),
                               budget_schedule(4, "inverse_sqrt"), SearchConfig(beam_size=1, max_len_a=1.0, max_len_b=3),
                               val_bleu_samples=10, val_bleu_every=2)
    translated, logged = [], []
    real_translate = module._translate
    monkeypatch.setattr(module, "_translate", lambda *args: translated.append(module.global_step) or real_translate(*args))

    class Logged(L.Callback):
        def on_validation_end(self, trainer, pl_module) -> None:
            logged.append((trainer.global_step, float(trainer.callback_metrics["val/loss"]), pl_module.bleu_scored))

    # Early stopping with no patience for a score that is not new: it stops at the second *scored* validation
    # (step 6), never at a validation that only repeats the last score (step 4).
    early = ScoredEarlyStopping(monitor="val/bleu", mode="max", patience=1, min_delta=1000.0)
    trainer = L.Trainer(max_steps=8, val_check_interval=2, check_val_every_n_epoch=None, num_sanity_val_steps=0,
                        logger=L.pytorch.loggers.CSVLogger(tmp_path, name="csv", version=0), enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[Logged(), early],
                        default_root_dir=str(tmp_path))
    trainer.fit(module, datamodule=datamodule)
    assert sorted(set(translated)) == [2, 6]  # validations 1 and 3 translate; 2 (step 4) does not
    assert logged == [(2, logged[0][1], True), (4, logged[1][1], False), (6, logged[2][1], True)]
    assert logged[1][1] != logged[0][1] and trainer.global_step == 6  # a new loss each time; stopped at step 6
    rows = (tmp_path / "csv" / "version_0" / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    bleu_steps = [int(row.split(",")[header.index("step")]) for row in rows[1:] if row.split(",")[header.index("val/bleu")]]
    assert bleu_steps == [1, 5]  # val/bleu logged at the scored validations only (the loggers' steps, from 0)
    with pytest.raises(ValueError, match="val_bleu_every=0 must be a whole number >= 1"):
        TranslationModule(small_model(datamodule), None, None, val_bleu_every=0)
