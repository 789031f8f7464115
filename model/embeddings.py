"""Word embeddings and positional encodings: the first two of the article's three parts.

Token ids become vectors (scaled by √d_model, as in Vaswani et al.), and a position signal
is added so that "dogs chase cats" and "cats chase dogs" differ.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """(max_len, d_model) table: PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...)."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sine/cosine positions (the 2017 paper's default); nothing to learn."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        """Positions offset .. offset+length-1 -> (length, d_model)."""
        return self.table[offset : offset + length]


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position (BERT/GPT style)."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        positions = torch.arange(offset, offset + length, device=self.embedding.weight.device)
        return self.embedding(positions)


class Embeddings(nn.Module):
    """tokens (B, L) -> dropout(token_embedding · √d_model + position) (B, L, d_model)."""

    def __init__(self, vocab_size: int, d_model: int, pad_id: int = 0, max_len: int = 512,
                 positional: str = "sinusoidal", dropout: float = 0.1) -> None:
        super().__init__()
        self.token = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.max_len = max_len
        if positional == "sinusoidal":
            self.position: nn.Module | None = SinusoidalPositionalEncoding(d_model, max_len)
        elif positional == "learned":
            self.position = LearnedPositionalEmbedding(d_model, max_len)
        elif positional == "none":  # an ablation: attention alone sees a bag of words
            self.position = None
        else:
            raise ValueError(f"positional must be 'sinusoidal', 'learned' or 'none', got {positional!r}")
        self.scale = math.sqrt(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens: Tensor, offset: int = 0) -> Tensor:
        """``offset``: position of the first token (the number of cached decoding steps)."""
        if offset + tokens.size(1) > self.max_len:
            raise ValueError(f"sequence of length {offset + tokens.size(1)} exceeds max_len={self.max_len}")
        x = self.token(tokens) * self.scale  # (B, L, d_model)
        if self.position is not None:
            x = x + self.position(tokens.size(1), offset).to(x.dtype)
        return self.dropout(x)
