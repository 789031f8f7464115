"""Human word alignments shipped with the project (``data/alignment/``), read for a run's language pair.

A gold pair is two sentences as word lists and the links a person drew between them: ``(source word,
target word)``, 0-based. The files are English–Spanish; an es→en run reads them with the sides swapped,
and any other pair has none. ``written()`` puts the words back into text as people write it (no space
before a full stop): a model reads text, and a space before "." is a token it rarely saw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from data.languages import LanguagePair

FOLDER = Path(__file__).with_name("alignment")
GOLD_SETS = {"everyday": "en-es-everyday.jsonl", "europarl": "en-es-europarl.jsonl"}  # what each one is: README.md
NO_SPACE_BEFORE = {".", ",", "?", "!", ":", ";", ")", "]", "»", "%", "...", "n't"}
NO_SPACE_AFTER = {"¿", "¡", "(", "[", "«"}


class GoldPair(NamedTuple):
    """Two sentences as words and the links between them, ``(source index, target index)``."""

    src_words: list[str]
    tgt_words: list[str]
    links: frozenset[tuple[int, int]]


def read_gold(path: Path, swap: bool = False) -> list[GoldPair]:
    """The pairs of a JSON-lines file (``src_words``, ``tgt_words``, ``alignment``); ``swap``: the other direction."""
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):  # only \n ends a record
        if not line.strip():
            continue
        record = json.loads(line)
        src, tgt, links = record["src_words"], record["tgt_words"], {tuple(link) for link in record["alignment"]}
        if not all(0 <= s < len(src) and 0 <= t < len(tgt) for s, t in links):
            raise ValueError(f"{path}:{number}: a link points past the end of its sentence")
        pairs.append(GoldPair(tgt, src, frozenset((t, s) for s, t in links)) if swap
                     else GoldPair(src, tgt, frozenset(links)))
    return pairs


def gold_sets(pair: LanguagePair) -> dict[str, list[GoldPair]]:
    """The gold sets for ``pair`` by name (English–Spanish, either direction); none for another pair."""
    if {pair.source, pair.target} != {"en", "es"}:
        return {}
    return {name: read_gold(FOLDER / file, swap=pair.source == "es") for name, file in GOLD_SETS.items()}


def written(words: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """The words as text (spaces where people write them) and each word's character span in it."""
    text, spans = "", []
    for i, word in enumerate(words):
        glued = i == 0 or word in NO_SPACE_BEFORE or word.startswith("'") or words[i - 1] in NO_SPACE_AFTER
        text += "" if glued else " "
        spans.append((len(text), len(text) + len(word)))
        text += word
    return text, spans
