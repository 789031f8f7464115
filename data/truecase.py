"""The first word in its usual case: a sentence is read with its first word written as the training split writes
it inside sentences, and its translation is given back the capital the sentence began with.

    "Kitchen"               → "kitchen"               → "cocina"                → "Cocina"
    "Where is the station?" → "where is the station?" → "¿dónde está la estación?" → "¿Dónde está la estación?"
    "Tom is tall."          → "Tom is tall."  (inside a sentence the corpus writes "Tom")

Without it, a word typed alone ("Kitchen") is spelled as the corpus' sentences almost never begin, while the same
word inside a sentence ("the kitchen") is what the model knows: every first word would be learned twice. This is
Moses' truecasing: the counts are the training split's words inside sentences (never a line's first word), one
table a side; a word it never holds inside a sentence, or holds capitalized more often than not, stays as typed.
Saved as ``truecase.json`` beside the tokenizer; a tokenizer without it (trained before) reads lines as they are.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

FILE = "truecase.json"
FIRST_WORD = re.compile(r"^[^\w]*?([^\W\d_]+)")  # the line's first word (its letters), after quotes or ¿ ¡
INSIDE = re.compile(r"(?<![.!?…:]\s)(?<=\s)[^\W\d_]+")  # a word after a space, unless a sentence ends before it


def usual_case(counts: Counter) -> set[str]:
    """Words (lowered) a side writes in lower case inside sentences more often than capitalized."""
    return {word for word, lower in counts.items() if word.islower() and lower > counts.get(word.capitalize(), 0)}


def inside_words(text: str) -> list[str]:
    """The words of ``text`` that stand inside a sentence: after a space and not after a sentence's end."""
    return INSIDE.findall(text)


class Truecaser:
    """The words each side writes in lower case inside its sentences: a line's first word is read that way."""

    def __init__(self, source_lower: Iterable[str], target_lower: Iterable[str]) -> None:
        self.lower = {"src": frozenset(source_lower), "tgt": frozenset(target_lower)}

    @classmethod
    def learn(cls, pairs: Iterable[tuple[str, str]]) -> "Truecaser":
        """Counted over ``(source, target)`` training pairs, inside sentences only."""
        source, target = Counter(), Counter()
        for src, tgt in pairs:
            source.update(inside_words(src))
            target.update(inside_words(tgt))
        return cls(usual_case(source), usual_case(target))

    def read(self, text: str, side: str = "src") -> str:
        """``text`` with its first word lowered where the ``side`` writes it lowered inside a sentence; a word in
        capitals or with an inner capital ("USA", "iPad"), and a name ("Tom"), stays as typed."""
        match = FIRST_WORD.match(text)
        if match is None:
            return text
        word, start = match.group(1), match.start(1)
        lowered = word[0].lower() + word[1:]
        if word[0] == lowered[0] or len(lowered) != len(word) or word[1:] != word[1:].lower() \
                or word.lower() not in self.lower[side]:
            return text
        return text[:start] + lowered + text[start + len(word):]

    @staticmethod
    def written(translation: str, source: str) -> str:
        """A ``translation`` given the capital its ``source`` began with (its first letter capitalized where the
        source's first letter is a capital), as a sentence is written."""
        first = next((c for c in source if c.isalpha()), "")
        at = next((i for i, c in enumerate(translation) if c.isalpha()), None)
        if not first.isupper() or at is None or len(translation[at].upper()) != 1:
            return translation
        return translation[:at] + translation[at].upper() + translation[at + 1:]

    def save(self, folder: str | os.PathLike) -> Path:
        path = Path(folder) / FILE
        path.write_text(json.dumps({side: sorted(words) for side, words in self.lower.items()}, ensure_ascii=False))
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "Truecaser | None":
        """The table saved in ``folder``; None for a tokenizer trained before it (lines read as typed)."""
        path = Path(folder) / FILE
        if not path.is_file():
            return None
        saved = json.loads(path.read_text(encoding="utf-8"))
        return cls(saved["src"], saved["tgt"])
