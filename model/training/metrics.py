"""Translation scores with sacreBLEU: corpus BLEU and chrF against one or several references."""

from __future__ import annotations

from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str


def reference_streams(references: list[list[str]]) -> list[list[str]]:
    """Per-sentence reference lists -> sacreBLEU's per-reference streams, padded with None.

    Sentence i with 3 references and sentence j with 1 give streams [r_i1, r_j1],
    [r_i2, None], [r_i3, None]; sacreBLEU skips the None entries.
    """
    most = max((len(refs) for refs in references), default=1)
    return [[refs[k] if k < len(refs) else None for refs in references] for k in range(most)]


def corpus_scores(hypotheses: list[str], references: list[list[str]]) -> Scores:
    """Corpus-level BLEU and chrF (sacreBLEU defaults: 13a tokenization, exp smoothing)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference sets")
    if any(not refs for refs in references):
        raise ValueError("every sentence needs at least one reference")
    streams = reference_streams(references)
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, streams)
    chrf_score = chrf.corpus_score(hypotheses, streams)
    return Scores(bleu_score.score, chrf_score.score, str(bleu.get_signature()), str(chrf.get_signature()))
