"""A run's confidence marks: set by its validation split, scored on its test split, both translated through the
``Translator`` (``translate.py``'s pipeline): at the end of training, and by ``scripts/calibrate.py`` for a run
from before.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch
from sacrebleu.metrics import BLEU, CHRF
from torchmetrics.functional.classification import binary_auroc

from data.atomic_file import write_text_atomically
from data.languages import bleu_tokenizer
from model.confidence import Calibration, Confidence, calibrate, length_ratios
from model.inference.run_folder import CALIBRATION_FILE
from model.inference.translator import Translation, Translator

CALIBRATION_SENTENCES = 2000  # validation sentences that set the marks: their quantiles move by < 1% beyond
BAD_CHRF, BAD_BLEU, GOOD_CHRF = 30.0, 20.0, 60.0  # sentence chrF / BLEU below which a translation is bad; good above


def calibration_from(translator: Translator, sources: list[str]) -> Calibration | None:
    """The marks' thresholds from a validation split's ``sources`` as ``translator`` translates them, sentence by
    sentence; None without a sentence or where the engine gives no scores."""
    sentences = [sentence for line in translator.translate(sources) for sentence in line.sentences]
    if not sentences or any(sentence.confidence.score is None for sentence in sentences):
        return None
    ratios = length_ratios([s.src_ids for s in sentences], [s.output_ids for s in sentences],
                           translator.tokenizer.eos_id)
    return calibrate([s.confidence.score for s in sentences], ratios, translator.settings.search.beam_size,
                     [s.confidence.agreement for s in sentences])


def save_calibration(run_folder: Path, calibration: Calibration) -> None:
    """``<run>/confidence.json``, read back by ``model/inference/run_folder.read_calibration``."""
    write_text_atomically(run_folder / CALIBRATION_FILE, json.dumps(asdict(calibration), indent=2))


def auroc(scores: list[float], bad: list[bool]) -> float | None:
    """How well low ``scores`` tell the ``bad`` from the rest (torchmetrics' AUROC: ties count half); 0.5 is chance,
    1 perfect. None when either kind is missing."""
    if all(bad) or not any(bad):
        return None
    x = torch.tensor(scores, dtype=torch.float64)
    lowness = (x.max() - x) / (x.max() - x.min()).clamp(min=1e-300)  # in [0, 1]: read as probabilities, not logits
    return binary_auroc(lowness, torch.tensor(bad, dtype=torch.long)).item()


def share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def marked(marks: list[bool], bad: list[bool]) -> dict:
    """Of the sentences ``marks`` picks: how many, how many of them are bad (precision), how many bad it picks."""
    hits = sum(m and b for m, b in zip(marks, bad))
    return {"share": share(marks), "precision": round(hits / sum(marks), 4) if any(marks) else None,
            "recall": round(hits / sum(bad), 4) if any(bad) else None}


def translations_quality(translations: list[Translation], references: list[list[str]], target_lang: str) -> dict:
    """``confidence_quality`` of translated lines (each line's least sure sentence's marks), empty lines left out."""
    scored = [(t, refs) for t, refs in zip(translations, references) if t.confidence is not None]
    return confidence_quality([t.confidence for t, _ in scored], [t.text for t, _ in scored],
                              [refs for _, refs in scored], target_lang)


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
