"""How sure a translation is: a score and an agreement per sentence, flags for what they miss, and three marks.

The score is the model's own mean log-probability per output token (``Output.score``, read from the search):
the best cheap detector of bad and hallucinated translations (Guerreiro et al., 2023; Dale et al., 2023).
The agreement says what the score alone misses: how much the beam's other hypotheses, from the same search,
say what the translation says (their character n-gram F-score against it). A model sure of its words but
unsure what the sentence means writes alternatives that diverge; one unsure only of its wording writes
paraphrases. Where both are known the marks read them together (``Combination``).
Two checks catch what both miss: an output repeating an n-gram far more than its source (the search caught
in a loop) and an output length far from the usual ratio to its source (a clause dropped, or invented); a
third says the source was truncated.
A run's own validation split sets where the marks change (``calibrate``), so "check" means the same share
of that run's translations whatever the model; neither figure is called a probability.
"""

from __future__ import annotations

import functools
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from model.search import Output

MARKS = ("fine", "check", "likely wrong")
CHECK_QUANTILE, WRONG_QUANTILE = 0.30, 0.10  # validation figures below these quantiles: "check", "likely wrong"
LENGTH_QUANTILES = (0.005, 0.995)  # output/source length ratios outside these validation quantiles: flagged
REPEAT_NGRAMS = (2, 3, 4)  # n-grams of token ids counted (single tokens repeat in any sentence: "de", "the")
MIN_REPEATS = 3  # an n-gram this often in the output, and more than twice the source's most repeated n-gram
# Character n-grams up to 3 in the agreement: as telling as chrF's default 6, in less than half the time.
AGREEMENT_CHAR_ORDER = 3


@dataclass(frozen=True)
class Combination:
    """How the marks read the score and the agreement together: each as a standard score over the validation
    split (its mean 0, its spread 1), summed with equal weights; the sum's quantiles set the marks."""

    score_mean: float
    score_std: float
    agreement_mean: float
    agreement_std: float
    check_below: float  # a sum below this is marked "check"
    wrong_below: float  # ... "likely wrong"

    def __post_init__(self) -> None:
        if not (self.score_std > 0 and self.agreement_std > 0):
            raise ValueError(f"spreads must be positive, got {self.score_std} and {self.agreement_std}")

    def combined(self, score: float, agreement: float) -> float:
        """The sum of the two standard scores: 0 for a sentence as sure as the validation split's average,
        negative for less sure (a rank, not a probability)."""
        return ((score - self.score_mean) / self.score_std
                + (agreement - self.agreement_mean) / self.agreement_std)


@dataclass(frozen=True)
class Calibration:
    """Where a run's marks change, set by the scores, agreements and lengths of its validation split's
    translations."""

    check_below: float  # a score below this is marked "check" (where there is no agreement)
    wrong_below: float  # ... "likely wrong"
    shortest_ratio: float  # output/source token ratios outside [shortest, longest] raise the length flag (set by
    # the outputs that ended)
    longest_ratio: float
    sentences: int  # validation sentences that set them
    beam_size: int  # the search they were translated with (a score depends on it: translate.py warns on another)
    combination: Combination | None = None  # with the agreement (None: set by a search without, or before it)


@dataclass(frozen=True)
class Confidence:
    """How sure one translated sentence is: its score and agreement, the three flags, and the mark they make."""

    score: float | None  # mean log-probability per output token (None: the engine gives none)
    repeats: bool  # an n-gram repeated far more often than in its source
    length: bool  # an unusual length for its source (outside the run's band), or the output never ended
    cut: bool  # its source was longer than the model reads: truncated
    mark: str | None  # one of MARKS; None when no flag is raised and there is no score or no calibration
    agreement: float | None = None  # 0-100 (``agreement``); None without the beam's other hypotheses
    combined: float | None = None  # score and agreement combined (``Combination``), where both and it are known

    @property
    def flags(self) -> list[str]:
        """The names of the flags raised."""
        return [name for name in ("repeats", "length", "cut") if getattr(self, name)]


def most_repeated(ids: list[int], n: int) -> int:
    """How often the most frequent n-gram of ``ids`` occurs (0 when shorter than n)."""
    counts = Counter(tuple(ids[i : i + n]) for i in range(len(ids) - n + 1))
    return max(counts.values(), default=0)


def repeats(source_ids: list[int], output_ids: list[int]) -> bool:
    """The output repeats an n-gram far more than its source repeats any (a loop, not "very, very")."""
    for n in REPEAT_NGRAMS:
        found = most_repeated(output_ids, n)
        if found >= MIN_REPEATS and found > 2 * most_repeated(source_ids, n):
            return True
    return False


def length_ratio(source_ids: list[int], output_ids: list[int]) -> float:
    """Output tokens per source token, both with their EOS."""
    return len(output_ids) / max(len(source_ids), 1)


def length_ratios(sources: list[list[int]], outputs: list[list[int]], eos_id: int) -> list[float]:
    """The length ratios that set the usual band: of the outputs that ended (all, if none did), so that a loop cut
    at the length limit does not widen it."""
    ended = [(src, out) for src, out in zip(sources, outputs) if out[-1:] == [eos_id]]
    return [length_ratio(src, out) for src, out in ended or zip(sources, outputs)]


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank, no interpolation)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@functools.cache
def agreement_metric():
    """sacrebleu's chrF with ``AGREEMENT_CHAR_ORDER`` (imported when first asked: a translation without
    scores never needs it)."""
    from sacrebleu.metrics import CHRF

    return CHRF(char_order=AGREEMENT_CHAR_ORDER)


def agreement(translation: str, alternatives: list[str]) -> float | None:
    """How much the beam's other hypotheses say what ``translation`` says: the mean of its chrF against each,
    0-100 (100: all the same); None without alternatives."""
    if not alternatives:
        return None
    chrf = agreement_metric()
    return sum(chrf.sentence_score(translation, [other]).score for other in alternatives) / len(alternatives)


def beam_agreements(outputs: list[Output], decode: Callable[[list[list[int]]], list[str]]) -> list[float | None]:
    """Each output's ``agreement`` with its alternatives, all decoded to text in one call of ``decode``."""
    texts = iter(decode([ids for output in outputs if output.alternatives
                         for ids in (output.ids, *output.alternatives)]))
    found = []
    for output in outputs:
        mine = [next(texts) for _ in range(1 + len(output.alternatives))] if output.alternatives else [""]
        found.append(agreement(mine[0], mine[1:]))
    return found


def fit_combination(scores: list[float], agreements: list[float]) -> Combination:
    """The standard scores' scales, and the marks' thresholds on their sum, from a validation split."""
    means = statistics.fmean(scores), statistics.fmean(agreements)
    spreads = [statistics.pstdev(values) or 1.0 for values in (scores, agreements)]  # all equal: it tells nothing
    summed = [(score - means[0]) / spreads[0] + (found - means[1]) / spreads[1]
              for score, found in zip(scores, agreements)]
    return Combination(means[0], spreads[0], means[1], spreads[1], quantile(summed, CHECK_QUANTILE),
                       quantile(summed, WRONG_QUANTILE))


def calibrate(scores: list[float], ratios: list[float], beam_size: int,
              agreements: list[float | None] | None = None) -> Calibration:
    """The marks' thresholds from the scores (and, when all known, agreements) of a validation split's
    translations, and the length ratios of those that ended."""
    if not scores or not ratios:
        raise ValueError(f"calibrating needs scores and length ratios, got {len(scores)} and {len(ratios)}")
    known = agreements is not None and len(agreements) == len(scores) and None not in agreements
    return Calibration(quantile(scores, CHECK_QUANTILE), quantile(scores, WRONG_QUANTILE),
                       quantile(ratios, LENGTH_QUANTILES[0]), quantile(ratios, LENGTH_QUANTILES[1]), len(scores),
                       beam_size, fit_combination(scores, agreements) if known else None)


def confidence(source_ids: list[int], output: Output, eos_id: int, cut: bool = False,
               calibration: Calibration | None = None, agreement: float | None = None) -> Confidence:
    """The score, flags and mark of one translated sentence (``source_ids`` as the model read them;
    ``agreement`` with its alternatives, when known). The marks read score and agreement together where the
    calibration can, else the score alone."""
    ended = bool(output.ids) and output.ids[-1] == eos_id
    ratio = length_ratio(source_ids, output.ids)
    unusual = calibration is not None and not calibration.shortest_ratio <= ratio <= calibration.longest_ratio
    flags, score = (repeats(source_ids, output.ids), unusual or not ended, cut), output.score
    combination = calibration.combination if calibration is not None else None
    combined = (combination.combined(score, agreement)
                if combination is not None and score is not None and agreement is not None else None)
    if any(flags):
        mark = "likely wrong"
    elif combined is not None:
        mark = MARKS[(combined < combination.check_below) + (combined < combination.wrong_below)]
    elif calibration is None or score is None:
        mark = None
    else:
        mark = MARKS[(score < calibration.check_below) + (score < calibration.wrong_below)]
    return Confidence(score, *flags, mark, agreement, combined)


def marks_caveat(calibration: Calibration | None, beam_size: int) -> str | None:
    """Why the marks of a search with ``beam_size`` may not mean what they say (None: they do)."""
    if calibration is None:
        return "no confidence.json: marks from flags only (python scripts/calibrate.py RUN sets them)"
    if calibration.beam_size != beam_size:
        return f"the marks were set for beam {calibration.beam_size}: 'check' may come too often or too rarely"
    if calibration.combination is None and beam_size > 1:
        return ("confidence.json is from before the agreement: marks from the score alone "
                "(python scripts/calibrate.py RUN sets both)")
    return None
