"""The peer that scripts/benchmark.py measures against: the plain ``torch.nn.Transformer`` recipe as a tutorial
writes it (embeddings, sinusoidal positions, an output Linear; fp32, dropout 0.1, logits for every position)."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from model.embeddings import sinusoidal_table

PAD, BOS, EOS = 0, 1, 2  # the special ids, numbered as our tokenizer numbers them


class TorchTransformer(nn.Module):
    """The plain recipe at a given shape (the same keys as ``configs/model``)."""

    def __init__(self, vocab: int, d_model: int, num_heads: int, num_encoder_layers: int,
                 num_decoder_layers: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.register_buffer("positions", sinusoidal_table(256, d_model), persistent=False)
        self.transformer = nn.Transformer(d_model, num_heads, num_encoder_layers, num_decoder_layers, d_ff,
                                          dropout=dropout, batch_first=True)
        self.output = nn.Linear(d_model, vocab)

    def embed(self, embedding: nn.Embedding, tokens: torch.Tensor) -> torch.Tensor:
        return embedding(tokens) * math.sqrt(embedding.embedding_dim) + self.positions[: tokens.size(1)]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """src (B, S), tgt_in (B, T) -> logits (B, T, vocab)."""
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1))
        out = self.transformer(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt_in), tgt_mask=causal,
                               src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt_in == PAD,
                               memory_key_padding_mask=src == PAD, tgt_is_causal=True)
        return self.output(out)

    @torch.no_grad()
    def greedy(self, src: torch.Tensor, max_steps: int) -> torch.Tensor:
        """The usual uncached loop: the whole prefix through the decoder at every step."""
        memory = self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src == PAD)
        tokens = torch.full((src.size(0), 1), BOS, dtype=torch.long)
        for _ in range(max_steps):
            causal = nn.Transformer.generate_square_subsequent_mask(tokens.size(1))
            out = self.transformer.decoder(self.embed(self.tgt_embed, tokens), memory, tgt_mask=causal,
                                           memory_key_padding_mask=src == PAD)
            tokens = torch.cat([tokens, self.output(out[:, -1]).argmax(-1, keepdim=True)], dim=1)
        return tokens
