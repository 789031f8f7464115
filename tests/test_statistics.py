"""model/views/statistics.py: known maps give the known entropy and alignment values."""

import math

import torch

from model.views.statistics import attention_statistics, diagonal_share, monotonic_share, row_entropy
from model.search import SentenceAttention
from model.transformer import AttentionMaps


def test_uniform_maps():
    uniform = torch.full((2, 6, 5), 1 / 5)  # (heads, T, S)
    torch.testing.assert_close(row_entropy(uniform), torch.full((2,), math.log(5)))
    # Straight path from (0, 0) to (5, 4): positions 0, 0.8, 1.6, 2.4, 3.2, 4; two keys within 1 of each.
    torch.testing.assert_close(diagonal_share(uniform), torch.full((2,), 2 / 5))
    assert monotonic_share(uniform).tolist() == [1.0, 1.0]  # every arg-max is key 0: never backwards


def test_identity_and_reversed_maps():
    identity = torch.eye(5).expand(3, 5, 5)
    assert row_entropy(identity).tolist() == [0.0] * 3
    assert diagonal_share(identity).tolist() == [1.0] * 3 and monotonic_share(identity).tolist() == [1.0] * 3
    reversed_ = torch.eye(5).flip(-1)[None]  # the last source word first: the path runs backwards
    assert monotonic_share(reversed_).item() == 0.0
    assert math.isclose(diagonal_share(reversed_).item(), 1 / 5, rel_tol=1e-6)  # only the middle word is on it


def test_statistics_per_layer_head_and_mean():
    eye, flat = torch.eye(4)[None].repeat(2, 1, 1), torch.full((2, 4, 4), 0.25)
    maps = AttentionMaps([eye, flat], [eye, eye], [eye, flat])  # 2 layers, 2 heads, 4 tokens
    sentence = SentenceAttention([5, 6, 7, 2], [1, 8, 9, 10], [8, 9, 10, 2], maps)
    stats = attention_statistics([sentence, sentence])
    assert stats["attention_encoder_self/entropy_L1H2"] == 0.0
    assert math.isclose(stats["attention_encoder_self/entropy_L2H1"], math.log(4), rel_tol=1e-6)
    assert math.isclose(stats["attention_encoder_self/entropy"], math.log(4) / 2, rel_tol=1e-6)
    assert stats["attention_cross/diagonal_L1H1"] == 1.0 and stats["attention_cross/monotonic"] == 1.0
    assert "attention_encoder_self/diagonal" not in stats  # alignment is a cross-attention statistic
    assert len(stats) == 3 * (4 + 1) + 2 * (4 + 1)
