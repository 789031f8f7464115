"""A run's confidence marks: set by its validation split at the end of training, scored on its test split.

``scripts/calibrate.py`` sets them for a run from before, through ``translate.py``'s pipeline (per sentence of each
line, where this reads the split's rows as training does).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
from sacrebleu.metrics import BLEU, CHRF

from data.atomic_file import write_text_atomically
from data.languages import bleu_tokenizer
from data.sampler import pad_batch
from model.confidence import (Calibration, Confidence, auroc, beam_agreements, calibrate, confidence,
                              length_ratios)
from model.inference.run_folder import CALIBRATION_FILE
from model.search import Output, SearchConfig, search
from model.transformer import Seq2SeqTransformer

CALIBRATION_SENTENCES = 2000  # validation sentences that set the marks: their quantiles move by < 1% beyond
BAD_CHRF, BAD_BLEU, GOOD_CHRF = 30.0, 20.0, 60.0  # sentence chrF / BLEU below which a translation is bad; good above
Decode = Callable[[list[list[int]]], list[str]]  # output ids to text (the tokenizer's ``decode_tgt``)


@torch.no_grad()
def searched(model: Seq2SeqTransformer, sources: list[list[int]], bos_id: int, eos_id: int, config: SearchConfig,
             batch_size: int = 64) -> list[Output]:
    """The search's output for each source (ids ending in EOS), in batches of similar length, in their order."""
    order, found = sorted(range(len(sources)), key=lambda i: len(sources[i])), {}
    device = next(model.parameters()).device
    training, _ = model.training, model.eval()
    try:
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            src = pad_batch([sources[i] for i in rows], model.pad_id).to(device)  # (B, S)
            found.update(zip(rows, search(model, src, bos_id, eos_id, config)))
    finally:
        model.train(training)
    return [found[i] for i in range(len(sources))]


def calibration_of(sources: list[list[int]], outputs: list[Output], eos_id: int, beam_size: int,
                   decode: Decode) -> Calibration:
    """The marks' thresholds from a validation split's sources and their outputs (``decode``: ids to text, for
    the agreement)."""
    return calibrate([output.score for output in outputs],
                     length_ratios(sources, [output.ids for output in outputs], eos_id), beam_size,
                     beam_agreements(outputs, decode))


def save_calibration(run_folder: Path, calibration: Calibration) -> None:
    """``<run>/confidence.json``, read back by ``model/inference/run_folder.read_calibration``."""
    write_text_atomically(run_folder / CALIBRATION_FILE, json.dumps(asdict(calibration), indent=2))


def confidences(sources: list[list[int]], outputs: list[Output], eos_id: int, calibration: Calibration,
                decode: Decode, cut: list[bool] | None = None) -> list[Confidence]:
    """Each output's score, agreement, flags and mark (the sources as the model read them; ``cut``: which were
    truncated)."""
    cut = cut or [False] * len(sources)
    return [confidence(src, output, eos_id, was_cut, calibration, agreement)
            for src, output, was_cut, agreement in zip(sources, outputs, cut, beam_agreements(outputs, decode))]


def share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def marked(marks: list[bool], bad: list[bool]) -> dict:
    """Of the sentences ``marks`` picks: how many, how many of them are bad (precision), how many bad it picks."""
    hits = sum(m and b for m, b in zip(marks, bad))
    return {"share": share(marks), "precision": round(hits / sum(marks), 4) if any(marks) else None,
            "recall": round(hits / sum(bad), 4) if any(bad) else None}


def confidence_quality(found: list[Confidence], hypotheses: list[str], references: list[list[str]],
                       target_lang: str) -> dict:
    """How well the figure the marks read (score and agreement together where every sentence has both, else the
    score: ``ranked_by``) and the marks tell bad translations (sentence chrF < 30; BLEU < 20 beside it) from the
    rest, each figure alone beside it, and how often the flags fire on good ones (chrF >= 60)."""
    chrf, bleu = CHRF(), BLEU(tokenize=bleu_tokenizer(target_lang), effective_order=True)
    sentence_chrf = [chrf.sentence_score(h, refs).score for h, refs in zip(hypotheses, references)]
    sentence_bleu = [bleu.sentence_score(h, refs).score for h, refs in zip(hypotheses, references)]
    figures = {name: [getattr(c, name) for c in found] for name in ("combined", "score", "agreement")}
    ranked_by = next((name for name, values in figures.items() if None not in values), "score")
    ranking = [value if value is not None else 0.0 for value in figures[ranked_by]]
    bad = [score < BAD_CHRF for score in sentence_chrf]
    good = [c for c, score in zip(found, sentence_chrf) if score >= GOOD_CHRF]
    rounded = lambda value: None if value is None else round(value, 4)  # noqa: E731
    return {
        "sentences": len(found), "bad_share": share(bad), "ranked_by": ranked_by,
        "auroc_chrf_below_30": rounded(auroc(ranking, bad)),
        "auroc_bleu_below_20": rounded(auroc(ranking, [score < BAD_BLEU for score in sentence_bleu])),
        "auroc_chrf_below_30_alone": {name: rounded(auroc(values, bad)) for name, values in figures.items()
                                      if name != "combined" and None not in values},
        "likely_wrong": marked([c.mark == "likely wrong" for c in found], bad),
        "check_or_likely_wrong": marked([c.mark in ("check", "likely wrong") for c in found], bad),
        "flags_on_good": {"sentences": len(good), "repeats": share([c.repeats for c in good]),
                          "length": share([c.length for c in good]), "any": share([bool(c.flags) for c in good])},
    }
