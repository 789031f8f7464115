"""Short text cut from sentence pairs: a word, a label, a phrase of up to four words, and its translation: scored
in every run (``fragments``, of the test split) and, where ``data.short_text`` asks, learned (``short_pairs``, of
the training split only).

A phrase pair is read off the pair's word alignment (``data/ibm2.py``'s guide, trained on the words of the pairs
given and the context pairs beside them: unsupervised, so a test split's own pairs may be aligned with it): a
source span whose aligned target words form a span that no other source word aligns into (the usual consistency
rule of phrase-based translation). One phrase a pair, chosen by a seeded draw, half of them given a capital (as a
label or a heading has), none ending in punctuation (the ones learned end in a stop, as a bare piece is read);
beside them a split's own entries of one or two words, with all their references. ``words`` and ``fragments`` read
any language written with spaces; a pair whose sides have none (Japanese, Chinese) gives its whole entry only when
it is that short.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from data.ibm2 import NO_SOURCE, guide

WORD = re.compile(r"\w[\w'’-]*|[^\w\s]")  # a word (apostrophes and hyphens inside it) or one punctuation mark
LONGEST = 4  # source words of a phrase
SHORT_ENTRY = 2  # source words of an entry kept whole
COMMON = 100  # the source side's most frequent words ("the", "is"): a phrase holds another word too
LABELS = Path(__file__).parent / "labels"  # everyday labels with their accepted translations, a file a pair


class Fragment(NamedTuple):
    """A short source text, its references, and what it is: ``phrase`` (cut by the alignment) or ``entry``."""

    source: str
    references: list[str]
    kind: str  # "entry", "phrase" or "label"


def words(text: str) -> list[re.Match]:
    """The words and punctuation marks of ``text``, with where each is (so that a span is cut as written)."""
    return list(WORD.finditer(text))


def is_word(match: re.Match) -> bool:
    return match.group()[0].isalnum()


def consistent_phrases(links: Sequence[int], src_count: int) -> list[tuple[int, int, int, int]]:
    """(source start, end, target start, end), ends inclusive, of every source span of 1-``LONGEST`` words whose
    aligned target words form a span aligned to nothing outside it; ``links[j]``: target word j's source or -1."""
    found = []
    for start in range(src_count):
        for end in range(start, min(start + LONGEST, src_count)):
            targets = [j for j, i in enumerate(links) if start <= i <= end]
            if not targets:
                continue
            first, last = min(targets), max(targets)
            if all(links[j] == NO_SOURCE or start <= links[j] <= end for j in range(first, last + 1)):
                found.append((start, end, first, last))
    return found


def capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def phrase(source: str, target: str, links: Sequence[int], common: set[str],
           draw: random.Random) -> tuple[str, str] | None:
    """One phrase pair of ``source`` and ``target`` (their words aligned by ``links``), drawn at random among those
    that begin and end with an aligned word on both sides and hold a word outside the ``common`` ones (a noun, a
    verb: not "is" → "es" alone); None if there is none."""
    src, tgt, aligned = words(source), words(target), set(links)
    spans = [(s0, s1, t0, t1) for s0, s1, t0, t1 in consistent_phrases(links, len(src))
             if all(is_word(m) for m in (src[s0], src[s1], tgt[t0], tgt[t1])) and {s0, s1} <= aligned
             and any(m.group().lower() not in common for m in src[s0 : s1 + 1]) and (s0, s1) != (0, len(src) - 1)]
    if not spans:
        return None
    s0, s1, t0, t1 = draw.choice(spans)
    return source[src[s0].start() : src[s1].end()], target[tgt[t0].start() : tgt[t1].end()]


def common_words(sources: Sequence[str]) -> set[str]:
    """The most frequent words of the source side ("the", "is"), at most a tenth of its vocabulary."""
    counts = Counter(m.group().lower() for source in sources for m in words(source))
    return {word for word, _ in counts.most_common(min(COMMON, len(counts) // 10))}


def word_links(pairs: Sequence[tuple[str, str]]) -> list[list[int]]:
    """Each pair's target words aligned to its source words (``guide``: both directions intersected, -1: none)."""
    vocabulary: dict[str, int] = {}

    def ids(text: str) -> list[int]:
        return [vocabulary.setdefault(m.group().lower(), len(vocabulary)) for m in words(text)]

    return guide([(ids(source), ids(target)) for source, target in pairs])


def fragments(sources: Sequence[str], references: Sequence[Sequence[str]], context: Sequence[tuple[str, str]] = (),
              seed: int = 0) -> list[Fragment]:
    """The split's short entries whole, and a phrase of each longer pair (its first reference) cut by the word
    alignment learned on the split and the ``context`` pairs; every other phrase with a capital."""
    draw, found, seen = random.Random(seed), [], set()
    entries = [(s, refs) for s, refs in zip(sources, references) if sum(map(is_word, words(s))) <= SHORT_ENTRY]
    found += [Fragment(s, list(refs), "entry") for s, refs in entries]
    longer = [(s, refs[0]) for s, refs in zip(sources, references) if sum(map(is_word, words(s))) > SHORT_ENTRY]
    links = word_links([*longer, *context])[: len(longer)]
    common = common_words([source for source, _ in [*longer, *context]])
    for (source, target), target_links in zip(longer, links):
        cut = phrase(source, target, target_links, common, draw)
        if cut is None or cut[0].lower() in seen:
            continue
        seen.add(cut[0].lower())
        source_text, reference = map(capitalized, cut) if len(found) % 2 else cut  # every other one: a label's capital
        found.append(Fragment(source_text, [reference], "phrase"))
    return found


def ending(text: str) -> str:
    """The final punctuation mark of a sentence ("." "?" "!" "。"), or nothing."""
    found = words(text)
    return found[-1].group() if found and not is_word(found[-1]) else ""


def short_pairs(sources: Sequence[str], targets: Sequence[str], share: float, seed: int) -> list[tuple[str, str]]:
    """Phrase pairs to learn short text from: one of each of ``share`` of the pairs (drawn), cut by their word
    alignment, as cut and with a capital in turn, each ended with the stops the pairs' sentences most often end
    with ("red car.", "coche rojo."; "Kitchen.", "Cocina."): a piece without closing punctuation is read with a
    full stop (``data/sentences.py``). Only the pairs given are read: a training split's, never validation or test."""
    draw = random.Random(seed)
    chosen = sorted(draw.sample(range(len(sources)), round(share * len(sources))))
    common, links = common_words(sources), word_links(list(zip(sources, targets)))
    endings = Counter((ending(s), ending(t)) for s, t in zip(sources, targets)).most_common(1)
    (source_stop, target_stop), _ = endings[0] if endings else (("", ""), 0)
    found = []
    for index in chosen:
        cut = phrase(sources[index], targets[index], links[index], common, draw)
        if cut is not None:
            source, target = map(capitalized, cut) if len(found) % 2 else cut
            found.append((source + source_stop, target + target_stop))
    return found


def labels(source_lang: str, target_lang: str) -> list[Fragment]:
    """The shipped everyday labels of the pair (``data/labels/<a>-<b>.tsv``, read in either direction): each one's
    first form in the source language, every accepted form in the target's; none for a pair without a list."""
    path = next((LABELS / f"{a}-{b}.tsv" for a, b in ((source_lang, target_lang), (target_lang, source_lang))
                 if (LABELS / f"{a}-{b}.tsv").is_file()), None)
    if path is None:
        return []
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    source, target = rows[0].index(source_lang), rows[0].index(target_lang)  # the header names the columns
    forms = [[[form.strip() for form in row[source].split("|")], [form.strip() for form in row[target].split("|")]]
             for row in rows[1:] if len(row) == len(rows[0])]
    return [Fragment(sources[0], targets, "label") for sources, targets in forms]
