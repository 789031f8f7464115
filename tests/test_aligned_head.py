"""model/training/aligned_head.py: which head is aligned, its loss against a float64 recomputation, and the module
training it from the data's alignments (the loss logged; a head the model lacks refused in one line)."""

import csv

import lightning as L
import pytest
import torch

from helpers import compose_train, small_datamodule, small_model, tiny_model
from model.training.aligned_head import aligned_index, alignment_loss
from model.training.schedule import budget_schedule
from model.training.translation_module import TranslationModule


def test_the_aligned_head_is_counted_from_one_and_from_the_end():
    assert aligned_index(6, 8, None, 1) == (4, 0)  # the penultimate layer, as Garg et al.
    assert aligned_index(1, 2, None, 2) == (0, 1)  # a one-layer decoder: its only layer
    assert aligned_index(3, 4, 1, 4) == (0, 3) and aligned_index(3, 4, -1, 1) == (2, 0)
    for layers, heads, layer, head in ((3, 4, 4, 1), (3, 4, -4, 1), (3, 4, 1, 5), (2, 0, None, 1)):
        with pytest.raises(ValueError, match="no such cross-attention head"):
            aligned_index(layers, heads, layer, head)
    module = TranslationModule(tiny_model(num_decoder_layers=3), torch.optim.AdamW, budget_schedule(4),
                               alignment_weight=0.5, aligned_layer=-1, aligned_head=2)
    assert module.aligned == (2, 1)  # read from the model's decoder
    no_cross = tiny_model(cross_attention=False)  # the ablation: nothing to align, nothing refused without the loss
    assert TranslationModule(no_cross, torch.optim.AdamW, budget_schedule(4)).aligned is None
    with pytest.raises(ValueError, match="no such cross-attention head"):
        TranslationModule(no_cross, torch.optim.AdamW, budget_schedule(4), alignment_weight=0.5)


def test_the_loss_is_the_mean_cross_entropy_toward_the_aligned_source_token():
    weights = torch.softmax(torch.randn(2, 3, 4, dtype=torch.float64), dim=-1)  # (B, T, S)
    alignment = torch.tensor([[2, -1, 0], [3, 1, -1]])
    expected = -(weights[0, 0, 2].log() + weights[0, 2, 0].log() + weights[1, 0, 3].log() + weights[1, 1, 1].log()) / 4
    torch.testing.assert_close(alignment_loss(weights, alignment).double(), expected)
    assert alignment_loss(weights, torch.full((2, 3), -1)) == 0  # nothing to align: no loss, no NaN


def test_the_aligned_heads_weights_are_the_attention_maps_and_carry_gradients():
    model = tiny_model(30, num_decoder_layers=3).train()
    src, tgt_in = torch.randint(3, 30, (2, 7)), torch.randint(3, 30, (2, 6))
    src[1, 5:] = 0  # padding
    _, weights = model.forward_aligned(src, tgt_in, 1, 2)
    model.eval()
    logits, head = model.forward_aligned(src, tgt_in, 1, 2)  # evaluation mode: no dropout
    torch.testing.assert_close(head, model.attention_maps(src, tgt_in).cross[1][:, 2])
    torch.testing.assert_close(logits, model(src, tgt_in))
    assert weights[1, :, 5:].abs().max() == 0  # no weight on padding
    weights[:, :, 0].sum().backward()
    assert model.decoder_layers[1].cross_attn.in_proj_weight.grad.abs().sum() > 0
    assert model.decoder_layers[2].cross_attn.in_proj_weight.grad is None  # above the head: not reached


def test_training_pulls_the_aligned_head_and_logs_its_loss(tmp_path):
    assert small_datamodule(tmp_path / "plain")._alignments is None  # no aligned head: no teacher
    datamodule = small_datamodule(tmp_path, word_alignments=True)
    assert torch.equal(datamodule._alignments.lengths, datamodule._ids["train"][1].lengths)
    batch = next(iter(datamodule.train_dataloader()))
    assert batch["alignment"].shape == batch["tgt_out"].shape and (batch["alignment"] >= 0).any()
    assert "alignment" not in next(iter(datamodule.val_dataloader()))  # training only
    module = TranslationModule(small_model(datamodule), lambda p: torch.optim.AdamW(p, lr=1e-2),
                               budget_schedule(4, "inverse_sqrt"), val_bleu_samples=4, alignment_weight=0.5)
    trainer = L.Trainer(max_steps=30, limit_val_batches=0, log_every_n_steps=5, logger=L.pytorch.loggers.CSVLogger(
        tmp_path), enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, datamodule=datamodule)
    rows = [row for row in csv.DictReader(open(next(tmp_path.glob("lightning_logs/version_*/metrics.csv"))))
            if row.get("train/alignment_loss")]
    losses = [float(row["train/alignment_loss"]) for row in rows]
    assert len(losses) == 6 and losses[-1] < losses[0]
    saved = {}
    module.on_save_checkpoint(saved)  # what translate.py's alignments and the CTranslate2 export read
    assert saved["aligned_head"] == module.aligned and module.aligned is not None


def test_train_py_refuses_a_head_the_model_lacks_in_one_line():
    from runtime.config_checks import check_config
    from runtime.settings import SettingsError

    with pytest.raises(SettingsError, match=r"module.aligned_layer=3, module.aligned_head=1: no such cross-attention "
                                            r"head in a decoder of 1 layers of 2 heads"):
        check_config(compose_train("experiment=smoke", "data.on_device=false", "module.alignment_weight=0.05",
                                   "module.aligned_layer=3"))
    # No cross-attention: the preset sets no aligned head either, and that is fine.
    check_config(compose_train("experiment=smoke", "data.on_device=false", "+ablation=no_cross_attention"))
