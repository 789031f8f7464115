"""scripts/benchmark.py and scripts/torch_peer.py: the pieces behind the printed ratios, on tiny shapes."""

import pytest
import torch

from model.transformer import Seq2SeqTransformer
from scripts.benchmark import OP_KINDS, PAD, default_config, profile_by_kind, tatoeba_like_batch, training_step
from torch_peer import TorchTransformer

SHAPE = dict(d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)


def test_batch_is_right_padded_with_bos_and_eos():
    src, tgt = tatoeba_like_batch(20, vocab=100, seed=3)
    lengths = (src != PAD).sum(1)
    assert torch.equal((tgt != PAD).sum(1), lengths + 1) and (tgt[:, 0] == 1).all()
    assert all(src[i, n - 1] == 2 and (src[i, n:] == PAD).all() for i, n in enumerate(lengths.tolist()))


@pytest.mark.parametrize("bf16", [False, True])
def test_both_recipes_take_a_training_step(bf16):
    src, tgt = tatoeba_like_batch(8, vocab=100)
    for model in (Seq2SeqTransformer(100, 100, **SHAPE, share_embeddings=True), TorchTransformer(100, **SHAPE)):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        before = [p.detach().clone() for p in model.parameters()]
        training_step(model, optimizer, src, tgt, bf16)
        assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # it updated
        assert model(src, tgt[:, :-1]).shape == (8, tgt.size(1) - 1, 100)


def test_profile_shares_add_up_and_find_the_matrix_math():
    # Mostly matrix math (forward and backward), as a training step is: its share holds on a busy machine.
    inputs, weights = torch.randn(1024, 512), torch.randn(512, 512, requires_grad=True)

    def step():
        (inputs @ weights).relu().sum().backward()

    kinds, seconds = profile_by_kind(step, steps=4)
    shares = dict(kinds)
    assert sum(shares.values()) == pytest.approx(1.0) and seconds > 0
    assert shares[OP_KINDS[0][0]] > 0.2 and set(shares) <= {k for k, _ in OP_KINDS} | {"everything else"}


def test_the_benchmark_reads_the_default_config():
    cfg = default_config()
    assert cfg.model.d_model == 256 and cfg.runtime.precision == "auto" and "lr" in cfg.optim.optimizer
