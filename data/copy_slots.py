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
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

KINDS = ("name", "num")
SLOTS_PER_KIND = 6  # more names or numbers than this in one sentence stay text
SLOT_TOKENS = [f"<{kind}{n}>" for kind in KINDS for n in range(1, SLOTS_PER_KIND + 1)]
WORD = re.compile(r"[^\W\d_]+")  # letters of any script
NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")  # 7, 1999, 1,250, 10:45, 555-0199
SLOT = re.compile(r"( ?)(<(?:name|num)\d+>)")
FILE = "copy_slots.json"


def occurrences(entity: str) -> re.Pattern:
    """``entity`` as a whole word ("Tom", not "Tomás") or a whole number ("530", not "1,530" or "5300")."""
    if entity[0].isdigit():
        return re.compile(rf"(?<!\d)(?<!\d[.,:/-]){re.escape(entity)}(?!\d|[.,:/-]\d)")
    return re.compile(rf"(?<!\w){re.escape(entity)}(?!\w)")


def _name_like(word: str) -> bool:
    """Capitalized, or in a script without case (where any word may be a name)."""
    return word[0].isupper() or word[0].lower() == word[0].upper()


class CopySlots:
    """Which source words and numbers become slots, learned from the training pairs; saved beside the tokenizer."""

    def __init__(self, copied: Iterable[str], known: Iterable[str]) -> None:
        self.copied = set(copied)  # capitalized words the training pairs keep verbatim more often than not
        self.known = set(known)  # every English word of the training pairs, lower-cased

    @classmethod
    def learn(cls, pairs: Iterable[tuple[str, str]], min_count: int = 2) -> "CopySlots":
        """Read from training pairs: which capitalized words they copy (in ``min_count`` pairs or more, at
        least half of those that hold them) and every English word they hold."""
        seen, kept, known = Counter(), Counter(), set()
        for english, spanish in pairs:
            words = set(WORD.findall(english))
            known.update(word.lower() for word in words)
            spanish_words = set(WORD.findall(spanish))
            for word in filter(_name_like, words):
                seen[word] += 1
                kept[word] += word in spanish_words
        return cls({w for w, n in kept.items() if n >= min_count and 2 * n >= seen[w]}, known)

    def entities(self, source: str) -> dict[str, str]:
        """The slot of each distinct name and number of ``source`` a translation should copy, in order of
        appearance: ``{"Oluwaseun": "<name1>", "530": "<num1>"}``."""
        found = [(m.start(), "num", m.group()) for m in NUMBER.finditer(source)]
        found += [(m.start(), "name", m.group()) for m in WORD.finditer(source) if _name_like(m.group())
                  and (m.group() in self.copied or m.group().lower() not in self.known)]
        slots, counts = {}, Counter()
        for _, kind, text in sorted(found):
            if text not in slots and counts[kind] < SLOTS_PER_KIND:
                counts[kind] += 1
                slots[text] = f"<{kind}{counts[kind]}>"
        return slots

    def pair_slots(self, source: str, target: str | None) -> dict[str, str]:
        """A training pair's slots: only what its target holds verbatim, numbered again in source order.
        Without a target (translation, evaluation), every entity of the source."""
        if target is None:
            return self.entities(source)
        kept = [text for text in self.entities(source) if occurrences(text).search(target)]
        counts, slots = Counter(), {}
        for text in kept:
            kind = "num" if text[0].isdigit() else "name"
            counts[kind] += 1
            slots[text] = f"<{kind}{counts[kind]}>"
        return slots

    @staticmethod
    def mask(text: str, slots: dict[str, str]) -> str:
        """``text`` with every verbatim occurrence of a slot's entity replaced by its token, in one pass (a
        token's own digits are never read again as a number), longest entity first."""
        if not slots:
            return text
        either = "|".join(occurrences(entity).pattern for entity in sorted(slots, key=len, reverse=True))
        return re.sub(either, lambda match: slots[match.group()], text)

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
        path.write_text(json.dumps({"copied": sorted(self.copied), "known": sorted(self.known)}, ensure_ascii=False))
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "CopySlots | None":
        """The slots saved in ``folder``; ``None`` for a tokenizer trained without them."""
        path = Path(folder) / FILE
        if not path.is_file():
            return None
        saved = json.loads(path.read_text())
        return cls(saved["copied"], saved["known"])
