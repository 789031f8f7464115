"""Encoder and decoder layers: attention + feed-forward, each wrapped in residual + LayerNorm.

Pre-norm (default; trains stably without a long warm-up):  x = x + Dropout(Sublayer(LN(x)))
Post-norm (the 2017 paper):                                x = LN(x + Dropout(Sublayer(x)))
"""

from __future__ import annotations

import torch.nn as nn
from torch import Tensor

from model.attention import KVCache, MultiHeadAttention


class FeedForward(nn.Module):
    """Position-wise Linear -> ReLU -> Dropout -> Linear, (B, L, d_model) -> (B, L, d_model)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class Residual(nn.Module):
    """Runs a sublayer with its residual connection, LayerNorm before (pre) or after (post) it."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer) -> tuple[Tensor, Tensor | None]:
        """``sublayer(h) -> (output, weights or None)``; returns (new x, weights)."""
        h = self.norm(x) if self.norm_first else x
        out, weights = sublayer(h)
        x = x + self.dropout(out)
        return (x if self.norm_first else self.norm(x)), weights


class EncoderLayer(nn.Module):
    """Self-attention over the source (the article's blue block), then feed-forward."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.attn_block = Residual(d_model, dropout, norm_first)
        self.ff_block = Residual(d_model, dropout, norm_first)

    def forward(
        self, x: Tensor, padding_mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x: (B, S, d_model), padding_mask: (B, S) True = pad. Returns x and (B, H, S, S) weights."""

        def self_attention(h: Tensor):
            result = self.self_attn(h, h, h, key_padding_mask=padding_mask, need_weights=need_weights)
            return result if need_weights else (result, None)

        x, weights = self.attn_block(x, self_attention)
        x, _ = self.ff_block(x, lambda h: (self.feed_forward(h), None))
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention (orange), cross-attention to the encoder memory, feed-forward.

    ``cross_attention=False`` drops the middle block: the decoder never reads the source and
    becomes a language model of the target (an ablation).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = True,
                 cross_attention: bool = True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout) if cross_attention else None
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.self_block = Residual(d_model, dropout, norm_first)
        self.cross_block = Residual(d_model, dropout, norm_first) if cross_attention else None
        self.ff_block = Residual(d_model, dropout, norm_first)

    def forward(
        self,
        y: Tensor,
        memory: Tensor,
        memory_padding_mask: Tensor | None = None,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        need_weights: bool = False,
        causal: bool = True,
    ) -> tuple[Tensor, tuple[Tensor, Tensor | None] | None]:
        """y: (B, T, d_model), memory: (B, S, d_model). Returns y and (self, cross) weights.

        Target padding needs no mask here: targets are right-padded, so under the causal
        mask a real token never sees a pad token that comes after it. ``causal=False``
        lifts the mask (an ablation: the decoder then sees the very tokens it must predict).
        """

        def masked_self_attention(h: Tensor):
            result = self.self_attn(h, h, h, causal=causal, need_weights=need_weights, cache=self_cache)
            return result if need_weights else (result, None)

        def cross_attention(h: Tensor):
            result = self.cross_attn(
                h, memory, memory, key_padding_mask=memory_padding_mask, need_weights=need_weights, cache=cross_cache
            )
            return result if need_weights else (result, None)

        y, self_weights = self.self_block(y, masked_self_attention)
        cross_weights = None
        if self.cross_attn is not None:
            y, cross_weights = self.cross_block(y, cross_attention)
        y, _ = self.ff_block(y, lambda h: (self.feed_forward(h), None))
        return y, ((self_weights, cross_weights) if need_weights else None)
