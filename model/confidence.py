"""How sure a translation is: a score per sentence, flags for what the score misses, and three marks.

The score is the model's own mean log-probability per output token (``Output.score``, read from the search):
the best cheap detector of bad and hallucinated translations (Guerreiro et al., 2023; Dale et al., 2023).
Two checks catch what it misses: an output repeating an n-gram far more than its source (the search caught
in a loop) and an output length far from the usual ratio to its source (a clause dropped, or invented); a
third says the source was truncated.
A run's own validation split sets where the marks change (``calibrate``), so "check" means the same share
of that run's translations whatever the model; the score is never called a probability.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from model.search import Output

MARKS = ("fine", "check", "likely wrong")
CHECK_QUANTILE, WRONG_QUANTILE = 0.30, 0.10  # validation scores below these quantiles: "check", "likely wrong"
LENGTH_QUANTILES = (0.005, 0.995)  # output/source length ratios outside these validation quantiles: flagged
REPEAT_NGRAMS = (2, 3, 4)  # n-grams of token ids counted (single tokens repeat in any sentence: "de", "the")
MIN_REPEATS = 3  # an n-gram this often in the output, and more than twice the source's most repeated n-gram


@dataclass(frozen=True)
class Calibration:
    """Where a run's marks change, set by the scores and lengths of its validation split's translations."""

    check_below: float  # a score below this is marked "check"
    wrong_below: float  # ... "likely wrong"
    shortest_ratio: float  # output/source token ratios outside [shortest, longest] raise the length flag (set by
    # the outputs that ended)
    longest_ratio: float
    sentences: int  # validation sentences that set them
    beam_size: int  # the search they were translated with (a score depends on it: translate.py warns on another)


@dataclass(frozen=True)
class Confidence:
    """How sure one translated sentence is: its score, the three flags, and the mark they make."""

    score: float | None  # mean log-probability per output token (None: the engine gives none)
    repeats: bool  # an n-gram repeated far more often than in its source
    length: bool  # an unusual length for its source (outside the run's band), or the output never ended
    cut: bool  # its source was longer than the model reads: truncated
    mark: str | None  # one of MARKS; None when no flag is raised and there is no score or no calibration

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


def calibrate(scores: list[float], ratios: list[float], beam_size: int) -> Calibration:
    """The marks' thresholds from the scores of a validation split's translations and the length ratios of those
    that ended."""
    if not scores or not ratios:
        raise ValueError(f"calibrating needs scores and length ratios, got {len(scores)} and {len(ratios)}")
    return Calibration(quantile(scores, CHECK_QUANTILE), quantile(scores, WRONG_QUANTILE),
                       quantile(ratios, LENGTH_QUANTILES[0]), quantile(ratios, LENGTH_QUANTILES[1]), len(scores),
                       beam_size)


def confidence(source_ids: list[int], output: Output, eos_id: int, cut: bool = False,
               calibration: Calibration | None = None) -> Confidence:
    """The score, flags and mark of one translated sentence (``source_ids`` as the model read them)."""
    ended = bool(output.ids) and output.ids[-1] == eos_id
    ratio = length_ratio(source_ids, output.ids)
    unusual = calibration is not None and not calibration.shortest_ratio <= ratio <= calibration.longest_ratio
    flags, score = (repeats(source_ids, output.ids), unusual or not ended, cut), output.score
    if any(flags):
        mark = "likely wrong"
    elif calibration is None or score is None:
        mark = None
    else:
        mark = MARKS[(score < calibration.check_below) + (score < calibration.wrong_below)]
    return Confidence(score, *flags, mark)


def auroc(scores: list[float], bad: list[bool]) -> float | None:
    """How well low scores tell the ``bad`` from the rest: the chance that a bad sentence scores below a good
    one (ties count half); 0.5 is chance, 1 perfect. None when either kind is missing."""
    ranked, bad_count = sorted(zip(scores, bad)), sum(bad)
    good_count = len(bad) - bad_count
    if not bad_count or not good_count:
        return None
    below, good_seen, i = 0.0, 0, 0  # pairs (bad, good) with the bad one lower; good ones scoring lower so far
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        tied_bad = sum(flag for _, flag in ranked[i:j])
        tied_good = (j - i) - tied_bad
        below += tied_bad * (good_count - good_seen - tied_good) + 0.5 * tied_bad * tied_good
        good_seen += tied_good
        i = j
    return below / (bad_count * good_count)
