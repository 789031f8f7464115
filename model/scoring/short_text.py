"""Short text scored beside the sentences: the test split's own entries of one or two words, and a phrase of each
longer pair cut by its word alignment (``data/fragments.py``), half with a capital, none with final punctuation:
what people type first into a translator (a word, a label, a heading)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from data.fragments import Fragment
from model.training.metrics import corpus_scores

EXAMPLES = 12


def same(hypothesis: str, reference: str) -> bool:
    """Equal as a person reads a short text: whatever the case and the final stop."""
    return hypothesis.strip().rstrip(".!?。").casefold() == reference.strip().rstrip(".!?。").casefold()


def fragment_scores(translate: Callable[[list[str]], list[str]], fragments: Sequence[Fragment], target_lang: str,
                    sentence_chrf: float) -> dict | None:
    """BLEU, chrF and exact matches of ``translate`` on the ``fragments``, in all and per kind, the chrF against the
    ``sentence_chrf`` of the same run, and examples; None without a fragment."""
    if not fragments:
        return None
    hypotheses = translate([fragment.source for fragment in fragments])

    def scored(kind: str | None) -> dict:
        rows = [(f, h) for f, h in zip(fragments, hypotheses) if kind in (None, f.kind)]
        if not rows:
            return {"fragments": 0}
        scores = corpus_scores([h for _, h in rows], [f.references for f, _ in rows], target_lang)
        exact = sum(any(same(h, r) for r in f.references) for f, h in rows) / len(rows)
        return {"fragments": len(rows), "bleu": round(scores.bleu, 2), "chrf": round(scores.chrf, 2),
                "exact_match": round(exact, 4)}

    found, kinds = scored(None), dict.fromkeys(f.kind for f in fragments)
    return {**found, "chrf_ratio": round(found["chrf"] / sentence_chrf, 3) if sentence_chrf > 0 else None,
            "by_kind": {kind: scored(kind) for kind in kinds},
            "examples": {kind: [[f.source, h, f.references[0]] for f, h in zip(fragments, hypotheses)
                                if f.kind == kind][:EXAMPLES] for kind in kinds}}
