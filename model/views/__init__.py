"""Attention views: pictures, the explorer page, statistics, and the training callback that writes them.

Fed attention weights and token labels (a ``SentenceView``), never a tokenizer or a checkpoint.
``plotting.py`` imports matplotlib; the rest of the package does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.search import SentenceAttention

# The article's three attention types, by the names of ``AttentionMaps``' fields.
ATTENTION_TITLES = {
    "encoder_self": "encoder self-attention",
    "decoder_self": "decoder masked self-attention",
    "cross": "encoder-decoder (cross) attention",
}


@dataclass
class SentenceView:
    """One translated sentence, ready to show: its attention, the tokens on each axis and the texts."""

    attention: SentenceAttention
    src_tokens: list[str]  # encoder positions
    input_tokens: list[str]  # decoder inputs (BOS + outputs but the last)
    output_tokens: list[str]  # decoder outputs
    source: str
    translation: str
