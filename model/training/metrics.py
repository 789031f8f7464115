"""Translation scores with sacreBLEU (corpus BLEU and chrF, one or several references), gathered from every rank."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch.distributed as dist
from sacrebleu.metrics import BLEU, CHRF

from data.languages import bleu_tokenizer


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str


def reference_streams(references: list[list[str]]) -> list[list[str]]:
    """Per-sentence reference lists -> sacreBLEU's streams: [[a1, a2], [b1]] -> [a1, b1], [a2, None] (None skipped)."""
    most = max((len(refs) for refs in references), default=1)
    return [[refs[k] if k < len(refs) else None for refs in references] for k in range(most)]


def corpus_scores(hypotheses: list[str], references: list[list[str]], target_lang: str = "es",
                  lowercase: bool = False) -> Scores:
    """Corpus BLEU (the target language's tokenizer) and chrF, sacreBLEU's defaults; ``lowercase``: ignoring case."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference sets")
    if any(not refs for refs in references):
        raise ValueError("every sentence needs at least one reference")
    streams, chrf = reference_streams(references), CHRF(lowercase=lowercase)
    bleu = BLEU(tokenize=bleu_tokenizer(target_lang), lowercase=lowercase)
    bleu_score, chrf_score = bleu.corpus_score(hypotheses, streams), chrf.corpus_score(hypotheses, streams)
    return Scores(bleu_score.score, chrf_score.score, str(bleu.get_signature()), str(chrf.get_signature()))


def gathered(hypotheses: dict[int, Any]) -> dict[int, Any]:
    """Every rank's hypotheses (by sentence index) under DDP; this rank's alone otherwise."""
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return hypotheses
    parts: list[dict[int, Any]] = [{} for _ in range(dist.get_world_size())]
    dist.all_gather_object(parts, hypotheses)  # each rank scored its own share of the sentences
    return {k: v for part in parts for k, v in part.items()}
