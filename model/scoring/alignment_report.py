"""How well a run's cross-attention aligns words, against the human alignments shipped for its pair
(``data/gold_alignments.py``): the AER of every layer and head, of all of them averaged, and of a diagonal line
that reads no attention. The gold target is fed to the decoder (teacher forcing), so every run reads the same
sentences, whatever it would have translated."""

from __future__ import annotations

from bisect import bisect_right

import torch

from data.gold_alignments import GoldPair, gold_sets, written
from data.languages import LanguagePair
from data.tokenizer import TranslationTokenizer
from model.transformer import Seq2SeqTransformer
from model.views.alignment import Overlap, diagonal_alignment, links, word_weights

WHAT_IT_IS = ("where the decoder looked while it predicted each word (the cross-attention), not why it chose the "
              "word: an alignment error rate (AER, lower is better) against links a person drew")


def pieces_and_words(tokenizer: TranslationTokenizer, words: list[str], side: str = "src") -> tuple[list, list]:
    """The token ids of ``words`` written as text and read as the model reads a ``side``'s line (its leading space,
    its first word's usual case), and the word each piece belongs to (its last character's; a lone leading space,
    the first word's)."""
    text, spans = written(words)
    lead = " " if tokenizer.spaced else ""
    encoding = (tokenizer.src if side == "src" else tokenizer.tgt).encode(lead + tokenizer.truecased([text], side)[0])
    starts = [start + len(lead) for start, _ in spans]  # (reading keeps every character where it was)
    return encoding.ids, [max(bisect_right(starts, end - 1) - 1, 0) for _, end in encoding.offsets]


def cross_attention(model: Seq2SeqTransformer, tokenizer: TranslationTokenizer,
                    pair: GoldPair) -> tuple[torch.Tensor, list[int | None], list[int]] | None:
    """The cross-attention of every layer and head, (layers, heads, tgt_pieces, src_pieces), each row the one that
    predicts its target piece; the word of each source piece (None: EOS) and of each target piece. None for a pair
    longer than the model reads. Names and numbers become copy slots, as in training."""
    src_words, tgt_words = pair.src_words, pair.tgt_words
    if tokenizer.slots:  # a word that is a name or number the target holds: the slot token the model read
        held = {entity: slot for entity, slot in tokenizer.slots.entities(written(src_words)[0]).items()
                if entity in tgt_words}
        src_words, tgt_words = ([tokenizer.slots.mask(word, held) for word in side] for side in (src_words, tgt_words))
    src_ids, src_owner = pieces_and_words(tokenizer, src_words, "src")
    tgt_ids, tgt_owner = pieces_and_words(tokenizer, tgt_words, "tgt")
    if max(len(src_ids), len(tgt_ids)) + 1 > model.max_len:
        return None
    device = next(model.parameters()).device
    src = torch.tensor([src_ids + [tokenizer.eos_id]], device=device)
    tgt_in = torch.tensor([[tokenizer.bos_id] + tgt_ids], device=device)
    maps = model.attention_maps(src, tgt_in).cross  # per layer (1, heads, tgt_pieces + 1, src_pieces + 1)
    cross = torch.stack([layer[0, :, :-1] for layer in maps])  # row i predicts piece i; the row of EOS left out
    return cross, src_owner + [None], tgt_owner


def alignment_scores(model: Seq2SeqTransformer, tokenizer: TranslationTokenizer, pairs: list[GoldPair],
                     aligned: tuple[int, int] | None = None) -> dict:
    """The corpus AER of each layer and head, of each layer's heads averaged, of all averaged, of the diagonal, and of
    the ``aligned`` head (layer, head from 0: the one a loss trained to align), if any."""
    totals: dict[tuple | str, Overlap] = {}  # (layer, head), (layer,), () for all, "diagonal"
    scored = 0
    for pair in pairs:
        if (found := cross_attention(model, tokenizer, pair)) is None:
            continue
        weights, scored = word_weights(*found).cpu(), scored + 1  # (layers, heads, tgt_words, src_words)
        predicted = {(): links(weights.sum((0, 1))),
                     "diagonal": diagonal_alignment(len(pair.src_words), len(pair.tgt_words))}
        for layer, heads in enumerate(weights):
            predicted[(layer,)] = links(heads.sum(0))
            predicted |= {(layer, head): links(weights_) for head, weights_ in enumerate(heads)}
        for key, found_links in predicted.items():
            totals[key] = totals.get(key, Overlap()) + Overlap.of(found_links, pair.links)
    if not scored:
        return {"pairs": 0}
    aer = {key: round(overlap.aer, 1) for key, overlap in totals.items()}
    n_layers, n_heads = weights.shape[:2]
    best_layer = min(range(n_layers), key=lambda layer: aer[(layer,)])
    best_head = min(((layer, head) for layer in range(n_layers) for head in range(n_heads)), key=aer.__getitem__)
    guided = {"aligned_head": {"layer": aligned[0] + 1, "head": aligned[1] + 1, "aer": aer[aligned]}} if aligned else {}
    return {"pairs": scored, "averaged": aer[()], "diagonal": aer["diagonal"], **guided,
            "best_layer": {"layer": best_layer + 1, "aer": aer[(best_layer,)]},
            "best_head": {"layer": best_head[0] + 1, "head": best_head[1] + 1, "aer": aer[best_head]},
            "by_layer": [aer[(layer,)] for layer in range(n_layers)],
            "by_head": [[aer[(layer, head)] for head in range(n_heads)] for layer in range(n_layers)]}


@torch.no_grad()
def alignment_report(model: Seq2SeqTransformer, tokenizer: TranslationTokenizer, pair: LanguagePair,
                     only: str | None = None, aligned: tuple[int, int] | None = None) -> dict:
    """Every gold set of ``pair`` scored (layers and heads numbered from 1; ``aligned``: the aligned head, from 0), with
    a line on what it measures; for a pair without one, a line that says so. ``only``: that set alone (validation
    reads the in-domain one)."""
    sets = {name: pairs for name, pairs in gold_sets(pair).items() if only in (None, name)}
    if not sets:
        return {"note": f"no human word alignment is shipped for {pair.describe()}: the attention is not scored"}
    training = model.training
    model.eval()
    try:
        return {"what": WHAT_IT_IS, **{name: alignment_scores(model, tokenizer, pairs, aligned)
                                       for name, pairs in sets.items()}}
    finally:
        model.train(training)


def head_alignment(module, gold_set: str = "everyday") -> dict | None:
    """Each cross-attention head's AER now on the in-domain gold set of a ``TranslationModule``'s pair (the views show
    it beside each head, at every validation), with the set's name; None for a pair without one."""
    if getattr(module, "tokenizer", None) is None:  # a module that was never set up with its data
        return None
    report = alignment_report(module.model, module.tokenizer, module.pair, only=gold_set, aligned=module.aligned)
    scores = report.get(gold_set)
    return {"set": gold_set, **scores} if scores and scores["pairs"] else None
