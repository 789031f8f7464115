"""The test split as people paste it: paragraphs, Title Case and ALL CAPS, scored beside one sentence a line.

The corpus' test sentences are one short sentence a line, in sentence case; what people send is not. So the
test report also scores (``pasted_scores``), through the text pipeline every entry point uses
(``data/sentences.py``: sentences, labels, capitals) and the module's test search:

- ``paragraph``: the sentences joined in fours with a space, against their references joined the same way,
  beside the sentences translated one a line and joined afterwards (the same references): the ratio is what
  pasting a paragraph costs; ``shorter_than_half``: paragraphs whose translation is under half as long as
  the one made sentence by sentence (a sentence dropped);
- ``title_case`` and ``all_caps``: every source word capitalized, or the whole source in capitals,
  against the references, BLEU ignoring case, beside the sentences as written (also ignoring case).
"""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import torch

from data.casing import title_cased
from data.sampler import pad_batch
from data.sentences import LineSplitter, translate_pieces
from data.tokenizer import truncate_source
from model.search import search
from model.training.metrics import corpus_scores

PARAGRAPH = 4  # sentences joined into one paragraph


@torch.no_grad()
def translated_lines(module: L.LightningModule, lines: list[str], max_source_tokens: int,
                     batch_size: int = 64) -> list[str]:
    """``lines`` translated as ``translate.py`` translates them (sentence by sentence, joined back), by the
    module's model with its test search."""
    tokenizer, model, pair = module.tokenizer, module.model, module.pair

    def fits(text: str) -> bool:
        return len(text.encode()) < max_source_tokens or len(tokenizer.encode_src([text])[0]) <= max_source_tokens

    def translate(texts: list[str]) -> list[str]:
        ids = [truncate_source(seq, max_source_tokens) for seq in tokenizer.encode_src(texts)]
        order, outputs = sorted(range(len(texts)), key=lambda i: len(ids[i])), [None] * len(texts)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            src = pad_batch([ids[i] for i in rows], model.pad_id).to(module.device)  # (B, S)
            found = search(model, src, tokenizer.bos_id, tokenizer.eos_id, module.search_config)
            for i, text in zip(rows, tokenizer.decode_tgt(found, [texts[i] for i in rows])):
                outputs[i] = text
        return outputs

    splitter = LineSplitter(pair.source, pair.target, tokenizer, fits)
    pieces = [splitter.pieces(line) for line in lines]
    training, _ = model.training, model.eval()
    try:
        translated = translate_pieces(pieces, translate)
    finally:
        model.train(training)
    return [splitter.join(line_pieces, found) for line_pieces, found in zip(pieces, translated)]


def paragraphs(texts: list[str], size: int = PARAGRAPH) -> list[str]:
    return [" ".join(texts[i : i + size]) for i in range(0, len(texts), size)]


def paragraph_references(references: list[list[str]], size: int = PARAGRAPH) -> list[list[str]]:
    """The k-th reference of each paragraph: its sentences' k-th references joined (their first, where a
    sentence has fewer)."""
    joined = []
    for i in range(0, len(references), size):
        group = references[i : i + size]
        most = max(len(refs) for refs in group)
        joined.append([" ".join(refs[k] if k < len(refs) else refs[0] for refs in group) for k in range(most)])
    return joined


def pasted_scores(translate: Callable[[list[str]], list[str]], sources: list[str], references: list[list[str]],
                  target_lang: str) -> dict:
    """The scores of the module docstring, for ``translate`` (lines in, lines out) on one split."""
    as_pasted = {"sentences": sources, "paragraphs": paragraphs(sources),
                 "title_case": [title_cased(s) for s in sources], "all_caps": [s.upper() for s in sources]}
    everything = translate([line for lines in as_pasted.values() for line in lines])  # one call: each sentence once
    outputs, start = {}, 0
    for kind, lines in as_pasted.items():
        outputs[kind], start = everything[start : start + len(lines)], start + len(lines)
    joined_refs, one_a_line = paragraph_references(references), paragraphs(outputs["sentences"])
    sentence_bleu = corpus_scores(one_a_line, joined_refs, target_lang).bleu
    paragraph_bleu = corpus_scores(outputs["paragraphs"], joined_refs, target_lang).bleu
    shorter = sum(2 * len(p) < len(s) for p, s in zip(outputs["paragraphs"], one_a_line))

    uncased = {kind: corpus_scores(outputs[kind], references, target_lang, lowercase=True).bleu
               for kind in ("sentences", "title_case", "all_caps")}
    as_written = uncased["sentences"]
    return {
        "paragraph": {"bleu": round(paragraph_bleu, 2), "sentence_by_sentence_bleu": round(sentence_bleu, 2),
                      "ratio": ratio(paragraph_bleu, sentence_bleu), "paragraphs": len(one_a_line),
                      "shorter_than_half": shorter},
        "case_insensitive_bleu": {"as_written": round(as_written, 2), "title_case": round(uncased["title_case"], 2),
                                  "all_caps": round(uncased["all_caps"], 2)},
        "case_ratio": {kind: ratio(uncased[kind], as_written) for kind in ("title_case", "all_caps")},
        "examples": {kind: [lines[0], outputs[kind][0]] for kind, lines in as_pasted.items() if lines},
    }


def ratio(score: float, base: float) -> float | None:
    return round(score / base, 3) if base > 0 else None  # None: nothing to compare with (an untrained model)
