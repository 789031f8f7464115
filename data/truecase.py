"""The first word in its usual case (Moses' truecasing): a sentence is read with its first word written as the
training split writes it inside sentences, and its translation gets back the capital the sentence began with.

    "Kitchen"      → "kitchen"      → "cocina"        → "Cocina"
    "Where is it?" → "where is it?" → "¿dónde está?"  → "¿Dónde está?"
    "Tom is tall." → "Tom is tall." (inside a sentence the corpus writes "Tom")

Without it, a word typed alone is spelled as the corpus' sentences almost never begin ("Kitchen"), while the word
the model knows is the one inside them ("the kitchen"): every first word would be learned twice. The counts are
the training split's words inside sentences, one table a side; a word it never holds inside a sentence, or holds
capitalized more often than not, stays as typed. Saved as ``truecase.json`` beside the tokenizer.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

FILE = "truecase.json"
# The line's first word after quotes or ¿ ¡: its letters, then what hyphens and apostrophes join to it ("O'Neill")
FIRST_WORD = re.compile(r"^[^\w]*?([^\W\d_]+)((?:['’-][^\W\d_]+)*)")
INSIDE = re.compile(r"(?<![.!?…:]\s)(?<=\s)[^\W\d_]+")  # a word after a space, unless a sentence ends before it


class Truecaser:
    """The words each side writes in lower case inside its sentences: a line's first word is read that way."""

    def __init__(self, source_lower: Iterable[str], target_lower: Iterable[str]) -> None:
        self.lower = {"src": frozenset(source_lower), "tgt": frozenset(target_lower)}

    @classmethod
    def learn(cls, pairs: Iterable[tuple[str, str]]) -> "Truecaser":
        """Counted over ``(source, target)`` training pairs, inside sentences only: the words written in lower
        case more often than capitalized."""
        counts = (Counter(), Counter())
        for pair in pairs:
            for count, text in zip(counts, pair):
                count.update(INSIDE.findall(text))
        return cls(*({word for word, n in count.items() if word.islower() and n > count[word.capitalize()]}
                     for count in counts))

    def truecased(self, text: str, side: str = "src") -> str:
        """``text`` with its first word lowered where the ``side`` writes it so inside sentences; a word in
        capitals or with an inner capital ("USA", "iPad", "O'Neill"), or a name ("Tom"), stays as typed."""
        match = FIRST_WORD.match(text)
        word, joined = match.groups() if match else ("", "")
        lowered = word[:1].lower() + word[1:]
        if word == lowered or len(lowered) != len(word) or (word + joined)[1:] != (word + joined)[1:].lower() \
                or word.lower() not in self.lower[side]:  # O'Neill, Marie-Claire: a joined name
            return text
        return text[: match.start(1)] + lowered + text[match.end(1) :]

    @staticmethod
    def recapitalized(translation: str, source: str) -> str:
        """``translation`` with its first word capitalized unless its ``source`` begins with a lower-case letter (as
        typed: "where is it?"): a capital, a digit or a script without case begins a sentence as written. A first
        word with a capital or a digit already ("iPhone", "20") stays as it is."""
        first = next((c for c in source if c.isalnum()), "")
        match = re.search(r"\w+", translation)
        if first.islower() or match is None or not match.group().isalpha() or not match.group().islower():
            return translation
        at = match.start()
        return translation[:at] + translation[at].upper() + translation[at + 1 :]

    def save(self, folder: str | os.PathLike) -> Path:
        path = Path(folder) / FILE
        path.write_text(json.dumps({side: sorted(words) for side, words in self.lower.items()}, ensure_ascii=False),
                        encoding="utf-8")
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "Truecaser | None":
        """The table saved in ``folder``; None for a tokenizer trained before it (lines read as typed)."""
        path = Path(folder) / FILE
        if not path.is_file():
            return None
        saved = json.loads(path.read_text(encoding="utf-8"))
        return cls(saved["src"], saved["tgt"])
