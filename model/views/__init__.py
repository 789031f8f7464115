"""Attention views: pictures, the explorer page, statistics, and the training callback that writes them.

Fed attention weights and token labels (a ``SentenceView``), never a tokenizer or a checkpoint.
``plotting.py`` imports matplotlib; the rest of the package does not.
"""

from __future__ import annotations

from collections.abc import Callable
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
    languages: tuple[str, str] = ("source", "target")  # the names of the two languages, for the labels
    output_log_probs: list[float] | None = None  # the model's log-probability of each output (None: not given)


def sentence_view(attention: SentenceAttention, src_labels: Callable[[list[int]], list[str]],
                  tgt_labels: Callable[[list[int]], list[str]], source: str, translation: str,
                  languages: tuple[str, str] = ("source", "target"),
                  output_log_probs: list[float] | None = None) -> SentenceView:
    """A searched sentence's attention (``model.search.sentence_attention``) with the tokens of each axis,
    labelled by the tokenizer's ``src_labels`` / ``tgt_labels``: what the views draw, in training as in
    translation. ``languages``: what the source and the translation are written in (``English``, ``Dutch``);
    ``output_log_probs``: the search's log-probability of each output token."""
    return SentenceView(attention, src_labels(attention.src_ids), tgt_labels(attention.input_ids),
                        tgt_labels(attention.output_ids), source, translation, languages, output_log_probs)
