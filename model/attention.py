"""Attention from scratch: the article's single head, multi-head attention, masks and the KV cache.

The article ("Attention, from scratch") builds one class that covers the three attention
types of a Transformer:

- self-attention:          ``attn(x, x, x)``                 (encoder)
- masked self-attention:   ``attn(y, y, y, causal=True)``    (decoder)
- encoder-decoder (cross): ``attn(y, memory, memory)``       (decoder, keys/values from encoder)

and computes, for queries Q, keys K and values V,

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + M) V

in four steps: (1) Q Kᵀ, (2) scale by √d_k, (+ mask M), (3) softmax each row, (4) × V.
``attention_weights`` and ``attend`` below are those steps, line by line.
``MultiHeadAttention`` runs all heads at once and can hand the work to PyTorch's fused
``scaled_dot_product_attention`` kernel when the weights themselves are not needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def causal_mask(query_len: int, key_len: int, device: torch.device | None = None) -> Tensor:
    """Bool ``(query_len, key_len)`` mask, True where a query may NOT look (the future).

    With a KV cache the queries are the last ``query_len`` positions of ``key_len``, so
    query ``i`` sits at absolute position ``key_len - query_len + i`` and may see keys up
    to and including that position. For a square mask this is the article's
    ``torch.tril(torch.ones(n, n)) == 0``.
    """
    offset = key_len - query_len
    allowed = torch.ones(query_len, key_len, dtype=torch.bool, device=device).tril(diagonal=offset)
    return ~allowed


def blocked_positions(
    query_len: int,
    key_len: int,
    causal: bool = False,
    key_padding_mask: Tensor | None = None,
    device: torch.device | None = None,
) -> Tensor | None:
    """Combine the causal mask and the key padding mask into one bool mask (True = blocked).

    Returns ``None`` (nothing blocked) or a tensor broadcastable to
    ``(batch, heads, query_len, key_len)``.
    """
    blocked = None
    if causal:
        blocked = causal_mask(query_len, key_len, device)  # (Lq, Lk)
    if key_padding_mask is not None:
        padding = key_padding_mask[:, None, None, :]  # (B, 1, 1, Lk): the same keys for every head and query
        blocked = padding if blocked is None else (padding | blocked)
    return blocked


def attention_weights(q: Tensor, k: Tensor, blocked: Tensor | None = None) -> Tensor:
    """The article's steps 1-3: softmax(Q Kᵀ / √d_k + M), row by row.

    q: (..., Lq, d_k), k: (..., Lk, d_k) -> weights (..., Lq, Lk), each row sums to 1,
    except a row whose keys are all blocked, which is all zeros (never NaN).
    """
    similarities = q @ k.transpose(-2, -1)  # step 1: (..., Lq, Lk) dot products
    scaled = similarities / k.size(-1) ** 0.5  # step 2: scale by √d_k
    if blocked is not None:
        # The mask M: e^-inf = 0, so a blocked key gets no share at all.
        scaled = scaled.masked_fill(blocked, float("-inf"))
    weights = F.softmax(scaled, dim=-1)  # step 3: every row sums to 1
    if blocked is not None:
        # A row with every key blocked is softmax(-inf, ..., -inf) = NaN; make it 0.
        weights = weights.masked_fill(blocked.all(dim=-1, keepdim=True), 0.0)
    return weights


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    blocked: Tensor | None = None,
    need_weights: bool = False,
    dropout: float = 0.0,
    is_causal: bool = False,
    empty_rows: bool = True,
) -> tuple[Tensor, Tensor | None]:
    """Scaled dot-product attention, on either execution path. Returns (output, weights).

    Explicit path (``need_weights=True``): the article's four steps, weights returned for
    plotting. Fused path: ``F.scaled_dot_product_attention`` (flash / memory-efficient
    kernels), same result, no (Lq, Lk) matrix kept for backward. ``is_causal`` (fused path, with
    ``blocked`` None): the square causal mask, built by the kernel itself, which skips masked tiles.
    ``empty_rows=False`` promises that no query has every key blocked (training batches: every
    sentence has a token), sparing the fused path the check for such rows.
    """
    if need_weights:
        weights = attention_weights(q, k, blocked)  # (..., Lq, Lk)
        dropped = F.dropout(weights, p=dropout) if dropout > 0 else weights
        return dropped @ v, weights  # step 4: mix the values, (..., Lq, d_v)
    if blocked is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=is_causal), None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked, dropout_p=dropout)
    if empty_rows:  # the explicit path's guarantee: a query that may see nothing gets zeros
        out = out.masked_fill(blocked.all(dim=-1, keepdim=True), 0.0)
    return out, None


class Attention(nn.Module):
    """One attention head, exactly as the article's ``Attention`` class (no biases).

    ``torch.manual_seed(42); Attention(2)`` draws the article's W_Q, W_K, W_V.
    """

    def __init__(self, d_model: int, d_head: int | None = None) -> None:
        super().__init__()
        d_head = d_head or d_model
        # Created in the article's order: the seed decides the weights.
        self.WQ = nn.Linear(d_model, d_head, bias=False)
        self.WK = nn.Linear(d_model, d_head, bias=False)
        self.WV = nn.Linear(d_model, d_head, bias=False)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, causal: bool = False,
                key_padding_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """q: (Lq, d) or (B, Lq, d); k, v: (Lk, d) or (B, Lk, d); key_padding_mask: (B, Lk).

        Returns the output (B?, Lq, d_head) and the weights (B?, Lq, Lk), as the article prints both.
        """
        Q, K, V = self.WQ(q), self.WK(k), self.WV(v)  # (B?, L, d_head)
        blocked = blocked_positions(Q.size(-2), K.size(-2), causal, key_padding_mask, Q.device)
        if blocked is not None and blocked.dim() == 4:
            blocked = blocked.squeeze(1)  # one head: (B, Lq or 1, Lk)
        weights = attention_weights(Q, K, blocked)  # (B?, Lq, Lk)
        out = weights @ V  # step 4: (B?, Lq, d_head)
        return out, weights


@dataclass
class KVCache:
    """Keys and values kept between decoding steps, (batch, heads, length, d_head) each.

    Decoder self-attention appends one step's K/V at a time (``static=False``);
    cross-attention computes the encoder memory's K/V once and reuses them (``static=True``).
    """

    key: Tensor | None = None
    value: Tensor | None = None
    static: bool = False

    def reorder(self, batch_index: Tensor) -> None:
        """Follow beam search: keep the rows of the hypotheses that survived."""
        if self.key is not None:
            self.key = self.key.index_select(0, batch_index)
            self.value = self.value.index_select(0, batch_index)


def head_size(d_model: int, num_heads: int) -> int:
    """d_head when ``d_model`` is split over ``num_heads`` heads; ValueError when it does not divide."""
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return d_model // num_heads


class MultiHeadAttention(nn.Module):
    """Several heads, each with its own W_Q, W_K, W_V, run together in one batched call.

    Heads are drawn one by one in the article's order (``Attention`` objects), then packed
    into one ``in_proj_weight`` laid out like ``torch.nn.MultiheadAttention``'s:
    ``[W_Q of all heads; W_K of all heads; W_V of all heads]``, shape (3·heads·d_head, d_model).
    ``out_proj`` is W_O; with ``out_proj=False, d_head=d_model`` this is the article's
    concatenate-only ``MultiHeadAttention``.
    """

    def __init__(self, d_model: int, num_heads: int, d_head: int | None = None, out_proj: bool = True,
                 dropout: float = 0.0, bias: bool = False) -> None:
        super().__init__()
        d_head = head_size(d_model, num_heads) if d_head is None else d_head
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_head
        self.dropout = dropout
        self.fused = True  # False forces the explicit path everywhere (for checks)
        heads = [Attention(d_model, d_head) for _ in range(num_heads)]
        packed = [torch.cat([getattr(h, w).weight.detach() for h in heads]) for w in ("WQ", "WK", "WV")]
        self.in_proj_weight = nn.Parameter(torch.cat(packed))  # (3·H·d_head, d_model)
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * num_heads * d_head)) if bias else None
        inner = num_heads * d_head
        self.out_proj = nn.Linear(inner, d_model, bias=bias) if out_proj else None

    def _project(self, x: Tensor, part: slice) -> Tensor:
        """Project with a slice of the packed weights and split heads: (B, L, d) -> (B, H, L, ·)."""
        bias = None if self.in_proj_bias is None else self.in_proj_bias[part]
        y = F.linear(x, self.in_proj_weight[part], bias)  # (B, L, n·H·d_head)
        return y.unflatten(-1, (-1, self.d_head)).transpose(1, 2)  # (B, n·H, L, d_head)

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        causal: bool = False,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        head: int | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """q: (B, Lq, d) or (Lq, d); k, v: (B, Lk, d) or (Lk, d); key_padding_mask (B, Lk), True = pad.

        Returns the output (B, Lq, d_model) — (B, Lq, heads·d_head) without out_proj — and the
        per-head weights (B, heads, Lq, Lk) with ``need_weights``, else ``None`` (as ``torch.nn``).
        ``head``: instead, that one head's weights (B, Lq, Lk), by the explicit math beside the fused output and
        with their gradients (what an alignment guide trains).
        """
        unbatched = q.dim() == 2
        if unbatched:
            q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
        H, inner = self.num_heads, self.num_heads * self.d_head
        if cache is not None and cache.static and cache.key is not None:
            Q, K, V = self._project(q, slice(0, inner)), cache.key, cache.value  # memory K/V reused
        elif q is k and k is v:
            # Self-attention: one matmul for Q, K and V together.
            Q, K, V = self._project(q, slice(0, 3 * inner)).split(H, dim=1)
        elif k is v:
            Q = self._project(q, slice(0, inner))
            K, V = self._project(k, slice(inner, 3 * inner)).split(H, dim=1)
        else:
            Q = self._project(q, slice(0, inner))
            K = self._project(k, slice(inner, 2 * inner))
            V = self._project(v, slice(2 * inner, 3 * inner))
        if cache is not None:
            if not cache.static and cache.key is not None:
                K = torch.cat([cache.key, K], dim=2)  # (B, H, L_past + Lq, d_head)
                V = torch.cat([cache.value, V], dim=2)
            cache.key, cache.value = K, V

        Lq, Lk = Q.size(2), K.size(2)
        causal = causal and Lq > 1  # one new query sees every cached key: no causal mask needed at all
        use_math = need_weights or not self.fused
        # A square causal mask alone is the fused kernel's own (is_causal): no mask tensor is built for it.
        kernel_causal = causal and not use_math and key_padding_mask is None and Lq == Lk
        blocked = None if kernel_causal else blocked_positions(Lq, Lk, causal, key_padding_mask, Q.device)
        out, weights = attend(
            Q, K, V, blocked, need_weights=use_math, dropout=self.dropout if self.training else 0.0,
            is_causal=kernel_causal, empty_rows=not self.training,
        )  # (B, H, Lq, d_head), (B, H, Lq, Lk)
        out = out.transpose(1, 2).flatten(2)  # concatenate heads: (B, Lq, H·d_head)
        if self.out_proj is not None:
            out = self.out_proj(out)  # W_O: back to (B, Lq, d_model)
        weights = weights if need_weights else None  # the explicit path without the fused kernel computes them anyway
        if head is not None:  # one head's steps 1-3 again: (B, Lq, Lk)
            mask = causal_mask(Lq, Lk, Q.device) if kernel_causal else blocked
            mask = mask.squeeze(1) if mask is not None and mask.dim() == 4 else mask  # the same for every head
            weights = attention_weights(Q[:, head], K[:, head], mask)
        if unbatched:
            out = out.squeeze(0)
            weights = weights.squeeze(0) if weights is not None else None
        return out, weights
