"""model/translation_module.py: the loss, the injected optimizer and schedule, and validation BLEU
computed through the one search entry point."""

from pathlib import Path

import lightning as L
import pytest
import torch
import torch.nn.functional as F

from data.datamodule import TranslationDataModule
from helpers import explorer_data, small_corpus
from model.attention_stats import attention_statistics
from model.metrics import corpus_scores
from model.schedule import budget_schedule, inverse_sqrt_schedule
from model.search import SearchConfig, search
from model.transformer import Seq2SeqTransformer
from model.translation_module import TranslationModule, label_smoothed_loss


def test_label_smoothed_loss_equals_torch_cross_entropy():
    logits, target = torch.randn(2, 5, 11), torch.randint(0, 11, (2, 5))
    real = target != 0
    loss, nll, accuracy = label_smoothed_loss(logits[real], target[real], smoothing=0.1)
    expected = F.cross_entropy(logits.transpose(1, 2), target, ignore_index=0, label_smoothing=0.1)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, F.cross_entropy(logits[real], target[real]))
    assert accuracy == (logits[real].argmax(-1) == target[real]).float().mean()


@pytest.fixture(scope="module")
def datamodule(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    datamodule = TranslationDataModule(corpus_path=str(small_corpus(folder)), cache_dir=str(folder / "cache"),
                                       vocab_size=300, max_tokens=512, val_fraction=0.1, test_fraction=0.1)
    datamodule.setup()
    return datamodule


def tiny_model(datamodule: TranslationDataModule) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    return Seq2SeqTransformer(datamodule.src_vocab_size, datamodule.tgt_vocab_size, d_model=32, num_heads=2,
                              num_encoder_layers=1, num_decoder_layers=1, d_ff=64, max_len=64)


class LearningRates(L.Callback):
    """The learning rate each update used."""

    def __init__(self) -> None:
        self.used: list[float] = []

    def on_train_batch_start(self, trainer, *args) -> None:
        self.used.append(trainer.optimizers[0].param_groups[0]["lr"])


def fit_with_budget(datamodule, **budget) -> LearningRates:
    """Fit the tiny model under the budget schedule (warm-up 2 steps, peak 1e-2) for ``budget``."""
    rates = LearningRates()
    module = TranslationModule(tiny_model(datamodule), lambda params: torch.optim.AdamW(params, lr=1e-2),
                               budget_schedule(2), attention_samples=0)
    trainer = L.Trainer(**budget, limit_val_batches=0, logger=False, enable_checkpointing=False, callbacks=[rates],
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, datamodule=datamodule)
    rates.used.append(trainer.optimizers[0].param_groups[0]["lr"])  # what a next step would get
    return rates


def test_learning_rate_decays_to_zero_when_the_step_budget_is_spent(datamodule):
    used = fit_with_budget(datamodule, max_steps=8).used
    expected = [1e-2 * budget_schedule(2)(step, step / 8) for step in range(9)]
    assert used == pytest.approx(expected) and used[-1] == 0.0


def test_learning_rate_decays_to_zero_when_the_time_budget_is_spent(datamodule):
    used = fit_with_budget(datamodule, max_time={"seconds": 3}, max_steps=100_000).used
    assert len(used) > 5 and max(used) > 3e-3  # it trained, at a real learning rate on the way
    assert used[-1] < 0.1 * 1e-2  # and ends, when the clock stops it, near zero (within a step's time)
    assert all(a >= b for a, b in zip(used[2:], used[3:]))  # after warm-up, only down


@pytest.fixture(scope="module")
def trained(datamodule, tmp_path_factory):
    """A tiny model fitted for 6 steps on a generated corpus, validating at the end."""
    folder = tmp_path_factory.mktemp("module")
    model = tiny_model(datamodule)
    module = TranslationModule(model, lambda params: torch.optim.AdamW(params, lr=1e-2), inverse_sqrt_schedule(4),
                               SearchConfig(beam_size=2, max_len_a=1.0, max_len_b=3), val_bleu_samples=10,
                               attention_samples=1)
    trainer = L.Trainer(max_steps=6, val_check_interval=6, check_val_every_n_epoch=None, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(folder))
    trainer.fit(module, datamodule=datamodule)
    return trainer, module, datamodule


def test_inputs_are_read_once_in_setup(trained):
    _, module, datamodule = trained
    assert module.tokenizer is datamodule.tokenizer
    assert module.texts["validation"] == (datamodule.sources("validation"), datamodule.references("validation"))
    assert len(module.attention_sources) == 1


def test_injected_optimizer_and_schedule_are_used(trained):
    trainer, _, _ = trained
    optimizer, scheduler = trainer.optimizers[0], trainer.lr_scheduler_configs[0].scheduler
    assert isinstance(optimizer, torch.optim.AdamW)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * inverse_sqrt_schedule(4)(6))
    assert scheduler.last_epoch == 6


def test_validation_bleu_is_greedy_search_on_the_fixed_subset(trained):
    trainer, module, datamodule = trained
    module.eval()
    greedy = SearchConfig(beam_size=1, max_len_a=1.0, max_len_b=3)
    hypotheses = {}
    for batch in datamodule.val_dataloader():  # the same batches, the subset of rows 0-9
        chosen = batch["index"] < 10
        if chosen.any():
            output = search(module.model, batch["src"][chosen], 1, 2, greedy)
            hypotheses.update(zip(batch["index"][chosen].tolist(), datamodule.tokenizer.decode_tgt(output.ids)))
    assert sorted(hypotheses) == list(range(10))
    references = datamodule.references("validation")
    expected = corpus_scores([hypotheses[i] for i in range(10)], [references[i] for i in range(10)])
    assert float(trainer.callback_metrics["val/bleu"]) == pytest.approx(expected.bleu, abs=1e-4)
    assert {"train/loss", "train/ppl", "train/accuracy", "train/lr", "val/loss", "val/chrf"} <= set(
        trainer.callback_metrics)


def test_attention_pictures_explorer_and_statistics_of_the_fixed_sentences(trained):
    trainer, module, _ = trained
    folder = Path(trainer.default_root_dir) / "attention" / f"step_{trainer.global_step:06d}"
    assert sorted(p.name for p in folder.iterdir()) == ["attention.json", "cross_sentence0.png",
                                                      "decoder_self_sentence0.png", "encoder_self_sentence0.png"]
    explorer = explorer_data(folder.parent / "explorer.html")
    assert explorer["steps"][-1]["sentences"][0]["source"] == module.attention_sources[0][0]
    sentences = module.log_attention_maps()  # the same sentence, translated the same way again
    assert sentences[0].src_ids == module.attention_sources[0][1]
    logged = attention_statistics(sentences)
    assert all(float(trainer.callback_metrics[key]) == pytest.approx(value, abs=1e-5) for key, value in logged.items())
