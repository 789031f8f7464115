"""Copy slots: names and numbers stand in the text as slot tokens the model learns to copy.

A model trained on Tatoeba sees almost no one but Tom and Mary, and byte-level BPE cuts "530" and
"531" into pieces that share nothing: a name or a number it has not seen comes out garbled ("My name is
Oluwaseun." → "Mi nombre es Juyu."). So, as placeholders do in production translators, a source's
names and numbers are replaced by slot tokens before tokenizing (``<name1>``, ``<num1>``, numbered in
order of appearance), the model translates around them, and each slot in its output is replaced by the
text it stands for:

    Oluwaseun has 530 cats.  →  <name1> has <num1> cats.  →  <name1> tiene <num1> gatos.
                                                          →  Oluwaseun tiene 530 gatos.

Training pairs get slots only for what stands verbatim on both sides (Tom ↔ Tom, 1999 ↔ 1999), so
a slot always means "copy me". At translation time every number is a slot, and so is a capitalized
word that the training pairs copied more often than not (Tom, Boston) or that they never contained
at all (a name the model could not know); capitalized words the corpus translates ("English" →
"inglés", "Japan" → "Japón") stay words.

Scripts without letter case (Chinese, Japanese, Thai, Arabic, ...) have no capital to tell a name by, so
there only what the training pairs carry verbatim becomes a slot: numbers, a Latin-script name inside the
text ("私はTomです" reads as 私は · Tom · です: a word ends where the script's casing changes), a word the
corpus copies more often than not; never "any word not seen".
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

KINDS = ("name", "num")
SLOTS_PER_KIND = 6  # more names or numbers than this in one sentence stay text
SLOT_TOKENS = [f"<{kind}{n}>" for kind in KINDS for n in range(1, SLOTS_PER_KIND + 1)]
WORD = re.compile(r"[^\W\d_]+")  # a run of letters of any script
DIGIT_OR_UNDERSCORE = re.compile(r"[\d_]")
NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")  # 7, 1999, 1,250, 10:45, 555-0199
SLOT = re.compile(r"( ?)(<(?:name|num)\d+>)")
FILE = "copy_slots.json"


@functools.lru_cache(maxsize=None)
def cased(letter: str) -> bool:
    """A letter of a script with case (Latin, Greek, Cyrillic, Armenian)."""
    return letter.lower() != letter.upper()


def _cut_by_case(word: str) -> list[str]:
    """``私はTomです`` → ``私は``, ``Tom``, ``です``: a word of one script inside another's text is a word."""
    pieces, start = [], 0
    for i in range(1, len(word)):
        if cased(word[i]) != cased(word[i - 1]):
            pieces.append(word[start:i])
            start = i
    return [*pieces, word[start:]]


def _touches_a_digit(text: str, start: int, end: int) -> bool:
    return any(c.isdigit() or c == "_" for c in text[max(start - 1, 0) : start] + text[end : end + 1])


def tokens(text: str) -> list[tuple[int, str, str]]:
    """The numbers and whole words of ``text`` as ``(start, kind, text)``, kind ``num`` or ``word``. A word is
    a run of letters cut where casing changes, touching no digit or underscore ("Tom" in "Tom's", not in
    "Tom2"); a number is whole ("530", not in "1,530" or "5300")."""
    found = [(m.start(), "num", m.group()) for m in NUMBER.finditer(text)]
    may_touch = DIGIT_OR_UNDERSCORE.search(text) is not None  # most sentences hold neither: no check
    for match in WORD.finditer(text):
        start, word = match.start(), match.group()
        one_script = word.isascii() or all(map(cased, word)) or not any(map(cased, word))
        for piece in [word] if one_script else _cut_by_case(word):
            if not (may_touch and _touches_a_digit(text, start, start + len(piece))):
                found.append((start, "word", piece))
            start += len(piece)
    return sorted(found)


def contains(text: str, entity: str) -> bool:
    """``entity`` stands in ``text`` as a whole word or a whole number."""
    return any(token == entity for _, _, token in tokens(text))


class CopySlots:
    """Which source words and numbers become slots, learned from the training pairs; saved beside the tokenizer."""

    def __init__(self, copied: Iterable[str], known: Iterable[str], caseless_source: bool = False) -> None:
        self.copied = set(copied)  # name-like words the training pairs keep verbatim more often than not
        self.known = set(known)  # every source word of the training pairs, lower-cased
        self.caseless_source = caseless_source  # the source language's script has no letter case

    @staticmethod
    def _name_like(word: str) -> bool:
        """A candidate for a slot: capitalized, or in a script without case (where any word may be a name)."""
        return word[0].isupper() or not cased(word[0])

    @classmethod
    def learn(cls, pairs: Iterable[tuple[str, str]], min_count: int = 2) -> "CopySlots":
        """Read from ``(source, target)`` training pairs: which name-like words they copy (in ``min_count``
        pairs or more, at least half of those that hold them) and every source word they hold."""
        seen, kept, known, scripts = Counter(), Counter(), set(), Counter()
        for source, target in pairs:
            words = {token for _, kind, token in tokens(source) if kind == "word"}
            known.update(word.lower() for word in words)
            scripts.update(cased(word[0]) for word in words)  # True: a word of a cased script
            target_words = {token for _, kind, token in tokens(target) if kind == "word"}
            for word in filter(cls._name_like, words):
                seen[word] += 1
                kept[word] += word in target_words
        return cls({w for w, n in kept.items() if n >= min_count and 2 * n >= seen[w]}, known,
                   caseless_source=scripts[False] > scripts[True])

    def _is_slot(self, word: str) -> bool:
        """Copied by the training pairs, or a word they never held that looks like a name: capitalized, or in
        a caseless script inside cased text (张伟 in English). A word of a caseless source's own script is a
        slot only if the pairs copy it: there, nothing tells an unseen name from an unseen word."""
        if word in self.copied:
            return True
        if cased(word[0]):
            return word[0].isupper() and word.lower() not in self.known
        return not self.caseless_source and word not in self.known

    def entities(self, source: str) -> dict[str, str]:
        """The slot of each distinct name and number of ``source`` a translation should copy, in order of
        appearance: ``{"Oluwaseun": "<name1>", "530": "<num1>"}``."""
        slots, counts = {}, Counter()
        for _, kind, text in tokens(source):
            if kind == "word" and not self._is_slot(text):
                continue
            kind = "name" if kind == "word" else kind
            if text not in slots and counts[kind] < SLOTS_PER_KIND:
                counts[kind] += 1
                slots[text] = f"<{kind}{counts[kind]}>"
        return slots

    def pair_slots(self, source: str, target: str | None) -> dict[str, str]:
        """A training pair's slots: only what its target holds verbatim, numbered again in source order.
        Without a target (translation, evaluation), every entity of the source."""
        if target is None:
            return self.entities(source)
        in_target = {text for _, _, text in tokens(target)}
        kept = [text for text in self.entities(source) if text in in_target]
        counts, slots = Counter(), {}
        for text in kept:
            kind = "num" if text[0].isdigit() else "name"
            counts[kind] += 1
            slots[text] = f"<{kind}{counts[kind]}>"
        return slots

    @staticmethod
    def mask(text: str, slots: dict[str, str]) -> str:
        """``text`` with every whole-word or whole-number occurrence of a slot's entity replaced by its token."""
        if not slots:
            return text
        pieces, end = [], 0
        for start, _, token in tokens(text):
            if token in slots and start >= end:
                pieces += [text[end:start], slots[token]]
                end = start + len(token)
        return "".join(pieces) + text[end:]

    @staticmethod
    def restore(text: str, slots: dict[str, str]) -> str:
        """A translation's slot tokens replaced by what they stand for; a slot the source did not have is dropped."""
        entity_of = {token: entity for entity, token in slots.items()}

        def put(match: re.Match) -> str:  # a dropped slot takes the space before it along
            space, token = match.groups()
            return space + entity_of[token] if token in entity_of else ""
        return SLOT.sub(put, text)

    def save(self, folder: str | os.PathLike) -> Path:
        path = Path(folder) / FILE
        path.write_text(json.dumps({"copied": sorted(self.copied), "known": sorted(self.known),
                                    "caseless_source": self.caseless_source}, ensure_ascii=False))
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "CopySlots | None":
        """The slots saved in ``folder``; ``None`` for a tokenizer trained without them."""
        path = Path(folder) / FILE
        if not path.is_file():
            return None
        saved = json.loads(path.read_text())
        return cls(saved["copied"], saved["known"], saved.get("caseless_source", False))
