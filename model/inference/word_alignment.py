"""Which words of a line each word of its translation came from, read from the cross-attention of the search's own
output (the aligned head, else every head averaged), in the words of the line as pasted; Pharaoh's format (``0-0 1-2``).
How it is read and why: docs/attention.md. It shows where the decoder looked, not why it chose a word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
from tokenizers import Tokenizer
from torch.nn.utils.rnn import pad_sequence

from model.transformer import Seq2SeqTransformer
from model.views.alignment import Links, links, word_weights

WORD = re.compile(r"\S+")


def piece_words(tokenizer: Tokenizer, ids: Sequence[int]) -> list[int]:
    """The word (from 0, of the text ``ids`` decode to) in which each token of ``ids`` ends; a token that decodes to
    nothing (a special token) or to spaces belongs to the word before it."""
    prefixes = tokenizer.decode_batch([list(ids[: n + 1]) for n in range(len(ids))], skip_special_tokens=True)
    return [max(len(text.split()) - 1, 0) for text in prefixes]


def attention_links(weights: torch.Tensor, src_ids: Sequence[int], output_ids: Sequence[int],
                    src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, eos_id: int) -> Links:
    """The word links of one sentence from ``weights`` (output ids, source ids or more): row i, where the decoder
    looked while it chose output id i, summed into the words the ids decode to (EOS read, never linked)."""
    out = [i for i in output_ids if i != eos_id]
    src_words = [*piece_words(src_tokenizer, src_ids[:-1]), None]
    if not out or len(src_words) < 2:
        return frozenset()
    return links(word_weights(weights[: len(out), : len(src_ids)].float().cpu(), src_words,
                              piece_words(tgt_tokenizer, out)))


@torch.no_grad()
def sentence_links(model: Seq2SeqTransformer, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer,
                   sentences: Sequence[tuple[list[int], list[int]]], bos_id: int, eos_id: int,
                   aligned: tuple[int, int] | None = None) -> list[Links]:
    """The word links of each (source ids ending in EOS, output ids) pair, read in one teacher-forced pass (for an
    engine whose search keeps no attention): ``aligned`` (decoder layer, head, from 0) that head, else all averaged."""
    device, pad = next(model.parameters()).device, model.pad_id
    outputs = [[i for i in output if i != eos_id] for _, output in sentences]  # EOS predicts no word
    src = pad_sequence([torch.tensor(s) for s, _ in sentences], batch_first=True, padding_value=pad).to(device)
    tgt_in = pad_sequence([torch.tensor([bos_id] + out) for out in outputs], batch_first=True,
                          padding_value=pad).to(device)
    cross = model.attention_maps(src, tgt_in).cross  # per layer (B, heads, tgt, src)
    weights = cross[aligned[0]][:, aligned[1]] if aligned else torch.stack(cross).mean((0, 2))  # (B, tgt, src)
    return [attention_links(rows, src_ids, out, src_tokenizer, tgt_tokenizer, eos_id)
            for rows, (src_ids, _), out in zip(weights, sentences, outputs)]


def line_words(line: str, at: int, piece: str) -> list[int]:
    """The words of ``line`` (by index) holding each word of ``piece``, which starts at character ``at`` of it."""
    return [len(line[: at + word.start() + 1].split()) - 1 for word in WORD.finditer(piece)]


def line_alignment(source: tuple[str, list[tuple[int, str]]], target: tuple[str, list[tuple[int, str]]],
                   found: Sequence[Links]) -> list[tuple[int, int]]:
    """A line's links in its own words: ``source`` the line and where each translated piece's text starts in it,
    ``target`` the same of its translation, ``found`` each piece's links in its own words; sorted by target word."""
    pairs = set()
    for (src_at, src_text), (tgt_at, tgt_text), piece_links in zip(source[1], target[1], found, strict=True):
        src_words, tgt_words = line_words(source[0], src_at, src_text), line_words(target[0], tgt_at, tgt_text)
        if src_words and tgt_words:  # a repaired slot can add or drop a word: the nearest one kept
            pairs |= {(src_words[min(s, len(src_words) - 1)], tgt_words[min(t, len(tgt_words) - 1)])
                      for s, t in piece_links}
    return sorted(pairs, key=lambda pair: (pair[1], pair[0]))


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """``0-0 1-2 …``: source-target word indices."""
    return " ".join(f"{s}-{t}" for s, t in pairs)
