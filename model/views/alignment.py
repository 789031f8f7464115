"""Cross-attention read as word alignment, and scored against the links a person drew: the alignment error rate.

What this measures is where the decoder looked while it predicted each word, not why it chose the word: a head
can translate well and look elsewhere. Reading: the attention row that *predicts* a target piece (the row of
the token before it), each source word's pieces summed, a target word's pieces' rows summed; the target word
is linked to the source word with the most weight (the end-of-sentence token left out).

    AER = 100 · (1 − 2|A ∩ G| / (|A| + |G|))   (Och & Ney 2003, with one set of gold links: sure = possible)

summed over a whole set of sentences (the corpus AER), so long sentences weigh as much as their links.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

Links = frozenset[tuple[int, int]]  # (source word, target word), 0-based


class Overlap(NamedTuple):
    """What the AER of a set of sentences is made of: links both share, links predicted, links in the gold."""

    shared: int = 0
    predicted: int = 0
    gold: int = 0

    def __add__(self, other: "Overlap") -> "Overlap":  # type: ignore[override]
        return Overlap(*(a + b for a, b in zip(self, other)))

    @classmethod
    def of(cls, predicted: Iterable[tuple[int, int]], gold: Iterable[tuple[int, int]]) -> "Overlap":
        predicted, gold = set(predicted), set(gold)
        return cls(len(predicted & gold), len(predicted), len(gold))

    @property
    def aer(self) -> float:
        """The alignment error rate in percent (0: the gold links exactly; 100: none of them)."""
        total = self.predicted + self.gold
        return 100.0 * (1.0 - 2.0 * self.shared / total) if total else 0.0


def word_weights(weights: Tensor, src_words: Sequence[int | None], tgt_words: Sequence[int]) -> Tensor:
    """Attention ``weights`` (..., tgt_pieces, src_pieces), whose rows are already the ones that predict each target
    piece, summed into words: (..., tgt_words, src_words). ``src_words[j]``: the word of source piece j (None: a
    piece that is no word, such as EOS); ``tgt_words[i]``: the word of target piece i."""
    weights = weights.float()
    src_index = torch.tensor([-1 if w is None else w for w in src_words], device=weights.device)
    kept = src_index >= 0
    n_src, n_tgt = int(src_index.max()) + 1, max(tgt_words) + 1
    by_src = weights.new_zeros(*weights.shape[:-1], n_src).index_add_(-1, src_index[kept], weights[..., kept])
    tgt_index = torch.tensor(list(tgt_words), device=weights.device)
    return by_src.new_zeros(*by_src.shape[:-2], n_tgt, n_src).index_add_(-2, tgt_index, by_src)


def links(word_weights_: Tensor) -> Links:
    """Each target word linked to its source word of most weight: ``word_weights_`` (tgt_words, src_words)."""
    return frozenset((s, t) for t, s in enumerate(word_weights_.argmax(dim=-1).tolist()))


def word_alignment(weights: Tensor, src_words: Sequence[int | None], tgt_words: Sequence[int]) -> Links:
    """The links of attention ``weights`` (..., tgt_pieces, src_pieces), any leading axes (layers, heads) summed."""
    summed = word_weights(weights, src_words, tgt_words)
    return links(summed.reshape(-1, *summed.shape[-2:]).sum(0))


def diagonal_alignment(n_src: int, n_tgt: int) -> Links:
    """The baseline that reads no attention: target word j linked to source word round(j · n_src / n_tgt)."""
    return frozenset((min(n_src - 1, round(j * n_src / n_tgt)), j) for j in range(n_tgt))
