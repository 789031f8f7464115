"""Attention statistics, per kind, layer and head: how spread out, and (cross) how aligned.

- ``entropy``: mean over queries of -Σ w·log w (nats). Uniform over n keys gives log n;
  a one-hot row gives 0. It falls as heads learn to focus.
- ``diagonal`` (cross only): share of the weight within one source position of the straight
  path from the first source token to EOS; near 1 for word-by-word, monotonic alignments.
- ``monotonic`` (cross only): share of output tokens whose most-attended source position is
  not before the previous output token's; 1 when the reading order follows the source.
"""

from __future__ import annotations

import torch
from torch import Tensor

from model.search import SentenceAttention


def row_entropy(weights: Tensor) -> Tensor:
    """weights (..., Lq, Lk), rows summing to 1 -> mean row entropy (...,) in nats."""
    return -(weights * weights.clamp_min(1e-12).log()).sum(-1).mean(-1)


def diagonal_share(cross: Tensor) -> Tensor:
    """cross (..., T, S) -> mean share of each row's weight within 1 position of the straight path."""
    T, S = cross.shape[-2:]
    path = torch.arange(T, dtype=torch.float32) * (S - 1) / max(T - 1, 1)  # expected source position per output
    near = (torch.arange(S)[None, :] - path[:, None]).abs() <= 1  # (T, S)
    return (cross * near.to(cross.device)).sum(-1).mean(-1)


def monotonic_share(cross: Tensor) -> Tensor:
    """cross (..., T, S) -> share of steps t ≥ 1 whose arg-max source position does not go backwards."""
    if cross.size(-2) < 2:
        return torch.ones(cross.shape[:-2], device=cross.device)
    position = cross.argmax(dim=-1)  # (..., T)
    return (position[..., 1:] >= position[..., :-1]).float().mean(-1)


def attention_statistics(sentences: list[SentenceAttention]) -> dict[str, float]:
    """Scalars ``attention_<kind>/<stat>_L<layer>H<head>`` averaged over ``sentences``, plus
    ``attention_<kind>/<stat>``: the mean over every layer and head."""
    stats: dict[str, float] = {}
    functions = {"entropy": row_entropy, "diagonal": diagonal_share, "monotonic": monotonic_share}
    for kind in ("encoder_self", "decoder_self", "cross"):
        for name, function in functions.items():
            if (name != "entropy" and kind != "cross") or not getattr(sentences[0].maps, kind):
                continue
            # (sentences, layers, heads): one value per head of every layer of every sentence
            values = torch.stack([torch.stack([function(layer) for layer in getattr(s.maps, kind)])
                                  for s in sentences]).mean(0)
            for layer in range(values.size(0)):
                for head in range(values.size(1)):
                    stats[f"attention_{kind}/{name}_L{layer + 1}H{head + 1}"] = values[layer, head].item()
            stats[f"attention_{kind}/{name}"] = values.mean().item()
    return stats
