"""The test split as people paste it (paragraphs, Title Case, ALL CAPS), scored beside one sentence a line, through
the ``translate`` it is given (the test report's: the ``Translator``, translate.py's pipeline)."""

from __future__ import annotations

from collections.abc import Callable

from data.casing import title_cased
from model.training.metrics import corpus_scores

PARAGRAPH = 4  # sentences joined into one paragraph


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
