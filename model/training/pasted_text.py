"""The test split as people paste it (paragraphs, Title Case, ALL CAPS), scored beside one sentence a line."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import torch

from data.casing import title_cased
from data.sentences import LineSplitter, translate_pieces
from data.tokenizer import truncate_source
from model.training.confidence_report import searched
from model.training.metrics import corpus_scores

PARAGRAPH = 4  # sentences joined into one paragraph


@torch.no_grad()
def translated_lines(module: L.LightningModule, lines: list[str], max_source_tokens: int,
                     batch_size: int = 64) -> list[str]:
    """``lines`` translated as ``translate.py`` does (sentence by sentence, joined back), with the test search."""
    tokenizer, model, pair = module.tokenizer, module.model, module.pair

    def fits(text: str) -> bool:
        return len(text.encode()) < max_source_tokens or len(tokenizer.encode_src([text])[0]) <= max_source_tokens

    def translate(texts: list[str]) -> list[str]:
        ids = [truncate_source(seq, max_source_tokens) for seq in tokenizer.encode_src(texts)]
        found = searched(model, ids, tokenizer.bos_id, tokenizer.eos_id, module.search_config, batch_size)
        return tokenizer.decode_tgt([output.ids for output in found], texts)

    splitter = LineSplitter(pair.source, pair.target, tokenizer, fits)
    pieces = [splitter.pieces(line) for line in lines]
    translated = translate_pieces(pieces, translate)  # searched() evaluates the model in eval mode
    return [splitter.join(line_pieces, found) for line_pieces, found in zip(pieces, translated)]


def paragraphs(texts: list[str], size: int = PARAGRAPH) -> list[str]:
    return [" ".join(texts[i : i + size]) for i in range(0, len(texts), size)]


def paragraph_references(references: list[list[str]], size: int = PARAGRAPH) -> list[list[str]]:
    """The k-th reference of each paragraph: its sentences' k-th references joined (their first, if fewer)."""
    groups = [references[i : i + size] for i in range(0, len(references), size)]
    return [[" ".join(refs[k] if k < len(refs) else refs[0] for refs in group) for k in range(max(map(len, group)))]
            for group in groups]


def pasted_scores(translate: Callable[[list[str]], list[str]], sources: list[str], references: list[list[str]],
                  target_lang: str) -> dict:
    """Scores ``translate`` (lines in, lines out) on paragraphs of four, against references joined alike, beside the
    sentences one a line joined after; on Title Case and ALL CAPS, ignoring case, beside the sentences as written."""
    as_pasted = {"sentences": sources, "paragraphs": paragraphs(sources),
                 "title_case": [title_cased(s) for s in sources], "all_caps": [s.upper() for s in sources]}
    remaining = iter(translate([line for lines in as_pasted.values() for line in lines]))  # each sentence once
    outputs = {kind: [next(remaining) for _ in lines] for kind, lines in as_pasted.items()}
    joined_refs, one_a_line = paragraph_references(references), paragraphs(outputs["sentences"])
    sentence_bleu = corpus_scores(one_a_line, joined_refs, target_lang).bleu
    paragraph_bleu = corpus_scores(outputs["paragraphs"], joined_refs, target_lang).bleu
    shorter = sum(2 * len(p) < len(s) for p, s in zip(outputs["paragraphs"], one_a_line))  # a sentence dropped
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
