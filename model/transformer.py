"""The sequence-to-sequence Transformer: embeddings, encoder stack, decoder stack, output layer.

Plain ``nn.Module``: token ids in, logits out. Padding masks come from ``pad_id``.

    src (B, S) ──encode──► memory (B, S, d_model)
    tgt_in (B, T), memory ──decode──► logits (B, T, tgt_vocab)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
import torch.nn as nn
from torch import Tensor

from model.attention import KVCache, head_size
from model.embeddings import Embeddings
from model.layers import DecoderLayer, EncoderLayer


@dataclass
class DecoderCache:
    """Per-layer KV caches for incremental decoding, plus how many target steps are cached.

    Self-attention caches hold one row per hypothesis; cross-attention caches one row per memory
    row, which the k hypotheses of a sentence share in beam search.
    """

    self_attn: list[KVCache]
    cross_attn: list[KVCache]
    steps: int = 0

    def reorder(self, rows: Tensor) -> None:
        """Follow beam search: hypothesis i continues hypothesis ``rows[i]`` of the same sentence, so only
        the self-attention caches move (the sentence's memory stays where it is)."""
        for cache in self.self_attn:
            cache.reorder(rows)

    def keep(self, rows: Tensor, sentences: Tensor) -> None:
        """Drop what ended: keep these hypothesis rows and these memory rows (their sentences)."""
        self.reorder(rows)
        for cache in self.cross_attn:
            cache.reorder(sentences)


@dataclass
class AttentionMaps:
    """Attention weights of every layer, each (B, heads, query_len, key_len)."""

    encoder_self: list[Tensor] = field(default_factory=list)
    decoder_self: list[Tensor] = field(default_factory=list)
    cross: list[Tensor] = field(default_factory=list)


SIZES = ("d_model", "num_heads", "num_encoder_layers", "num_decoder_layers", "d_ff", "max_len")
DROPOUTS = ("dropout", "attention_dropout", "activation_dropout")


def _whole_number_problems(settings: Mapping, keys: tuple[str, ...], prefix: str = "") -> list[str]:
    """``key=value must be a whole number >= 1`` for each of ``keys`` that is not one (bool is not)."""
    return [f"{prefix}{key}={settings[key]!r} must be a whole number >= 1" for key in keys
            if key in settings and (isinstance(settings[key], bool) or not isinstance(settings[key], int)
                                    or settings[key] < 1)]


def shape_problems(settings: Mapping, prefix: str = "") -> list[str]:
    """What cannot build a ``Seq2SeqTransformer`` among ``settings`` (its arguments), one phrase each,
    keys written with ``prefix`` (``model.`` in train.py's check of a whole config)."""
    problems = _whole_number_problems(settings, SIZES, prefix)
    for key in DROPOUTS:  # attention_dropout, activation_dropout: null means "as dropout"
        dropout = settings.get(key, 0.0 if key == "dropout" else None)
        if (dropout is not None or key == "dropout") and (isinstance(dropout, bool) or not isinstance(
                dropout, (int, float)) or not 0 <= dropout < 1):
            problems.append(f"{prefix}{key}={dropout!r} must be in [0, 1)" + (", or null" if key != "dropout" else ""))
    if not problems:
        try:
            head_size(settings.get("d_model", 256), settings.get("num_heads", 4))
        except ValueError as error:
            problems.append(f"{prefix}{error}".replace(" num_heads=", f" {prefix}num_heads="))
    return problems


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer (Vaswani et al., 2017) built on the from-scratch attention."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 256,
        num_heads: int = 4,
        num_encoder_layers: int = 3,
        num_decoder_layers: int = 3,
        d_ff: int = 1024,
        dropout: float = 0.1,
        attention_dropout: float | None = None,
        activation_dropout: float | None = None,
        pad_id: int = 0,
        max_len: int = 256,
        positional: str = "sinusoidal",
        norm_first: bool = True,
        share_embeddings: bool = False,
        tie_output: bool = True,
        causal_decoder: bool = True,
        cross_attention: bool = True,
    ) -> None:
        super().__init__()
        problems = shape_problems(dict(d_model=d_model, num_heads=num_heads, num_encoder_layers=num_encoder_layers,
                                       num_decoder_layers=num_decoder_layers, d_ff=d_ff, max_len=max_len, dropout=dropout,
                                       attention_dropout=attention_dropout, activation_dropout=activation_dropout))
        if problems:
            raise ValueError("; ".join(problems))
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError("share_embeddings needs one joint vocabulary (src_vocab_size == tgt_vocab_size)")
        self.pad_id, self.max_len = pad_id, max_len
        # Ablations: causal_decoder=False lifts the mask in teacher-forced training only (search
        # feeds one token at a time: it cannot see the future anyway); cross_attention=False cuts
        # the decoder off from the source.
        self.causal_decoder = causal_decoder
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.src_embed = Embeddings(src_vocab_size, d_model, pad_id, max_len, positional, dropout)
        self.tgt_embed = Embeddings(tgt_vocab_size, d_model, pad_id, max_len, positional, dropout)
        inner_dropouts = dict(attention_dropout=attention_dropout, activation_dropout=activation_dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first, **inner_dropouts)
            for _ in range(num_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first, cross_attention, **inner_dropouts)
            for _ in range(num_decoder_layers)
        )
        # Pre-norm stacks end with a LayerNorm; post-norm layers already end normalized.
        self.encoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.output = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self._init_weights()
        if share_embeddings:
            self.tgt_embed.token.weight = self.src_embed.token.weight
        if tie_output:
            self.output.weight = self.tgt_embed.token.weight

    def _init_weights(self) -> None:
        # Xavier for every matrix, as torch.nn.Transformer does; embeddings ~ N(0, d^-1/2)
        # so that embedding · √d_model starts at unit scale.
        for name, p in self.named_parameters():
            if "token.weight" in name:
                nn.init.normal_(p, std=p.size(1) ** -0.5)
                nn.init.zeros_(p[self.pad_id])
            elif p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def src_padding_mask(self, src: Tensor) -> Tensor:
        """(B, S) bool, True at padding."""
        return src == self.pad_id

    def encode(self, src: Tensor) -> Tensor:
        """src (B, S) -> memory (B, S, d_model)."""
        memory, _ = self._run_encoder(src, need_weights=False)
        return memory

    def _run_encoder(self, src: Tensor, need_weights: bool) -> tuple[Tensor, list[Tensor]]:
        """The encoder stack; returns the memory and each layer's self-attention weights (empty without them)."""
        padding = self.src_padding_mask(src)
        x = self.src_embed(src)
        maps = []
        for layer in self.encoder_layers:
            x, weights = layer(x, padding, need_weights)  # weights: (B, H, S, S) or None
            if weights is not None:
                maps.append(weights)
        return self.encoder_norm(x), maps

    def new_cache(self) -> DecoderCache:
        """Empty caches for incremental decoding (see ``model/search.py``)."""
        n = len(self.decoder_layers)
        return DecoderCache([KVCache() for _ in range(n)], [KVCache(static=True) for _ in range(n)])

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src: Tensor,
        cache: DecoderCache | None = None,
        output_mask: Tensor | None = None,
        causal: bool = True,
    ) -> Tensor:
        """tgt_in (B, T), memory (B, S, d), src (B, S) -> logits (B, T, tgt_vocab).

        ``memory`` and ``src`` may instead hold one row per group of k consecutive rows of ``tgt_in``
        ((B / k, S, d) and (B / k, S)): the k hypotheses of a sentence in beam search read its one memory row.

        With ``cache``, ``tgt_in`` holds only the new steps; earlier steps' keys/values
        are read from the cache, and positions continue from ``cache.steps``.
        ``output_mask`` (bool (B, T)): logits only where it is True, as (N, tgt_vocab).
        ``causal=False``: no causal mask (the ``causal_decoder`` ablation, in training).
        """
        y, _, _ = self._run_decoder(tgt_in, memory, src, cache, need_weights=False, causal=causal)
        if output_mask is not None:
            y = y[output_mask]  # (N, d_model): the vocabulary projection skips what is not asked for
        return self.output(self.decoder_norm(y))  # (B, T, tgt_vocab) or (N, tgt_vocab)

    def decode_attending(self, tgt_in: Tensor, memory: Tensor, src: Tensor, cache: DecoderCache | None = None,
                         aligned: tuple[int, int] | None = None) -> tuple[Tensor, Tensor]:
        """``decode``'s logits, and where its rows looked in the source: the cross-attention of the ``aligned`` (layer,
        head), else of every layer and head averaged, (rows of ``tgt_in``, T, S) (what a search keeps for alignments)."""
        y, _, cross = self._run_decoder(tgt_in, memory, src, cache, need_weights=aligned is None, causal=True,
                                        aligned=aligned)
        weights = cross[0] if aligned is not None else torch.stack(cross).mean((0, 2))  # (B or B / k, k·T, S)
        return self.output(self.decoder_norm(y)), weights.reshape(*tgt_in.shape, -1)  # beams' shared rows apart

    def _run_decoder(
        self, tgt_in: Tensor, memory: Tensor, src: Tensor, cache: DecoderCache | None, need_weights: bool,
        causal: bool, aligned: tuple[int, int] | None = None,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """The decoder stack, before its final norm: (B, T, d_model), and per layer the masked
        self- and cross-attention weights (empty lists without ``need_weights``); ``aligned`` (layer, head): instead,
        that one head's cross-attention weights, (B, T, S), as the only cross map."""
        offset = cache.steps if cache is not None else 0
        y = self.tgt_embed(tgt_in, offset)
        padding = self.src_padding_mask(src)
        self_maps, cross_maps = [], []
        for i, layer in enumerate(self.decoder_layers):
            self_cache = cache.self_attn[i] if cache is not None else None
            cross_cache = cache.cross_attn[i] if cache is not None else None
            head = aligned[1] if aligned is not None and aligned[0] == i else None
            y, self_weights, cross_weights = layer(y, memory, padding, self_cache, cross_cache, need_weights, causal,
                                                   aligned_head=head)
            self_maps += [self_weights] if self_weights is not None else []
            cross_maps += [cross_weights] if cross_weights is not None else []
        if cache is not None:
            cache.steps += tgt_in.size(1)
        return y, self_maps, cross_maps

    def forward(self, src: Tensor, tgt_in: Tensor, output_mask: Tensor | None = None) -> Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T) -> logits (B, T, tgt_vocab).

        ``output_mask`` (bool (B, T)): return logits only there, as (N, tgt_vocab). Training
        passes the non-padding targets: the vocabulary projection, the largest matmul of
        the model, then skips the padding.
        """
        memory = self.encode(src)
        return self.decode(tgt_in, memory, src, output_mask=output_mask, causal=self.causal_decoder)

    def forward_aligned(self, src: Tensor, tgt_in: Tensor, layer: int, head: int,
                        output_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``forward``, and the cross-attention weights of one head of one decoder layer, (B, T, S), with their
        gradients: what a loss toward word alignments trains (Garg et al. 2019, "Jointly Learning to Align and
        Translate with Transformer Models")."""
        memory = self.encode(src)
        y, _, (weights,) = self._run_decoder(tgt_in, memory, src, None, need_weights=False, causal=self.causal_decoder,
                                             aligned=(layer, head))
        if output_mask is not None:
            y = y[output_mask]
        return self.output(self.decoder_norm(y)), weights

    @torch.no_grad()
    def attention_maps(self, src: Tensor, tgt_in: Tensor) -> AttentionMaps:
        """All attention weights for a (source, target) pair, via the explicit math path."""
        memory, encoder_maps = self._run_encoder(src, need_weights=True)
        _, self_maps, cross_maps = self._run_decoder(tgt_in, memory, src, None, need_weights=True, causal=True)
        return AttentionMaps(encoder_maps, self_maps, cross_maps)
