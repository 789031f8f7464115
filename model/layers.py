"""Encoder and decoder layers: attention + feed-forward, each wrapped in residual + LayerNorm.

Pre-norm (default; trains stably without a long warm-up):  x = x + Dropout(Sublayer(LN(x)))
Post-norm (the 2017 paper):                                x = LN(x + Dropout(Sublayer(x)))

Three dropouts, as fairseq names them: ``dropout`` on each sublayer's output (above),
``attention_dropout`` on the attention weights, ``activation_dropout`` after the ReLU; the last
two default to the first.
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
    """The residual connection around a sublayer, with its LayerNorm before (pre) or after (post) it.

    A layer calls ``h = block.norm_in(x)``, runs its sublayer on ``h``, then ``x = block.add(x, out)``.
    """

    def __init__(self, d_model: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def norm_in(self, x: Tensor) -> Tensor:
        """What the sublayer reads: LN(x) in pre-norm, x itself in post-norm."""
        return self.norm(x) if self.norm_first else x

    def add(self, x: Tensor, out: Tensor) -> Tensor:
        """x + Dropout(out), normalized afterwards in post-norm."""
        x = x + self.dropout(out)
        return x if self.norm_first else self.norm(x)


class EncoderLayer(nn.Module):
    """Self-attention over the source (the article's blue block), then feed-forward."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = True,
                 attention_dropout: float | None = None, activation_dropout: float | None = None):
        super().__init__()
        attention_dropout = dropout if attention_dropout is None else attention_dropout
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=attention_dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout if activation_dropout is None else activation_dropout)
        self.attn_block = Residual(d_model, dropout, norm_first)
        self.ff_block = Residual(d_model, dropout, norm_first)

    def forward(
        self, x: Tensor, padding_mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x: (B, S, d_model), padding_mask: (B, S) True = pad. Returns x and the (B, H, S, S) weights or None."""
        h = self.attn_block.norm_in(x)
        out, weights = self.self_attn(h, h, h, key_padding_mask=padding_mask, need_weights=need_weights)
        x = self.attn_block.add(x, out)
        x = self.ff_block.add(x, self.feed_forward(self.ff_block.norm_in(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention (orange), cross-attention to the encoder memory, feed-forward.

    ``cross_attention=False`` drops the middle block: the decoder never reads the source and
    becomes a language model of the target (an ablation).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = True,
                 cross_attention: bool = True, attention_dropout: float | None = None,
                 activation_dropout: float | None = None):
        super().__init__()
        attention_dropout = dropout if attention_dropout is None else attention_dropout
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=attention_dropout) if cross_attention else None
        self.feed_forward = FeedForward(d_model, d_ff, dropout if activation_dropout is None else activation_dropout)
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
        aligned_head: int | None = None,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """y: (B, T, d_model), memory: (B, S, d_model) or one row per group of rows of y (B / k, S, d_model,
        the hypotheses of one sentence in beam search). Returns y, the self- and the cross-attention
        weights ((B, H, T, T) and (B, H, T, S) with ``need_weights``, else None; cross None without it).
        ``aligned_head``: the cross-attention weights of that head alone, (B, T, S), with their gradients.

        Target padding needs no mask here: targets are right-padded, so under the causal
        mask a real token never sees a pad token that comes after it. ``causal=False``
        lifts the mask (an ablation: the decoder then sees the very tokens it must predict).
        """
        h = self.self_block.norm_in(y)
        out, self_weights = self.self_attn(h, h, h, causal=causal, need_weights=need_weights, cache=self_cache)
        y = self.self_block.add(y, out)
        cross_weights = None
        if self.cross_attn is not None:
            h = self.cross_block.norm_in(y)
            # Beam search shares a sentence's memory row among its k hypotheses (rows b·k … b·k+k-1 read
            # memory row b): their queries go in together, (B·k, T, d) -> (B, k·T, d). Cross-attention
            # has no mask between queries, so each query still sees exactly its own sentence.
            queries = h.reshape(memory.size(0), -1, h.size(-1)) if memory.size(0) != h.size(0) else h
            out, cross_weights = self.cross_attn(queries, memory, memory, key_padding_mask=memory_padding_mask,
                                                 need_weights=need_weights, cache=cross_cache, head=aligned_head)
            y = self.cross_block.add(y, out.reshape(h.shape))
        y = self.ff_block.add(y, self.feed_forward(self.ff_block.norm_in(y)))
        return y, self_weights, cross_weights
