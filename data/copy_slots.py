"""Copy slots: names, numbers and codes stand in the text as slot tokens the model learns to copy.

Tatoeba names almost no one but Tom and Mary, and byte-level BPE cuts "530" and "531" into pieces that share
nothing; so a source's names, numbers and codes (``data/entities.py`` reads them whole) are slot tokens before
tokenizing (``<name1>``, ``<num1>``, in order of appearance), and each slot of the output is filled back in:

    Oluwaseun has 530 cats.  →  <name1> has <num1> cats.  →  <name1> tiene <num1> gatos.
                                                          →  Oluwaseun tiene 530 gatos.

Training pairs get slots only for what stands verbatim on both sides (Tom ↔ Tom, 1999 ↔ 1999), so a
slot always means "copy me"; three in ten of them keep their names and numbers as text, so that a model
read without this step (the ``transformers`` export) copies the corpus' names too, and half of the rest
are numbered from a random set of slots, so that every slot token up to ``SLOTS_PER_KIND`` is learned.

At translation time every number and code is a slot, and a capitalized word is a slot when the training
pairs copy it more often than not (Tom, Boston) or when the corpus gives no reason to translate it:

- inside a sentence, unless the pairs hold it capitalized there and translate it more often than not
  ("London" → "Londres", "Monday" → "lunes" stay words): "Tell Daisy I called." has a name, though
  "daisy" is a word, because no pair capitalizes it inside a sentence;
- at a sentence's start, where any word is capitalized, and in capitals ("I", "USA", shouting), only
  when the corpus never holds the word at all;
- a capitalized word joined by hyphens or apostrophes is one slot if none of its parts is a word the
  corpus translates (``O'Neill``, not ``Spanish-English``); a word with an inner capital (``iPad``) is a
  candidate like a capitalized one;
- in a source without letter case (Chinese, Thai), a word of its script only when the pairs copy it.
"""

from __future__ import annotations

import json
import os
import random
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from data.entities import JOINERS, TYPED_SLOT, Token, cased, tokens
from data.in_processes import in_processes

KINDS = ("name", "num")
SLOTS_PER_KIND = 16  # more distinct names or numbers than this in one line stay text
SLOTS_PER_KIND_BEFORE = 6  # what a copy_slots.json without the count was trained with
SLOT_TOKENS = [f"<{kind}{n}>" for kind in KINDS for n in range(1, SLOTS_PER_KIND + 1)]
SLOT = re.compile(rf"( ?)({TYPED_SLOT.pattern})")  # a slot token, and the space before it
UNSLOTTED_SHARE = 0.3  # training pairs whose names and numbers stay text
RANDOM_NUMBERING_SHARE = 0.5  # of the slotted ones: slots drawn from all SLOTS_PER_KIND, not 1, 2, ...
FILE = "copy_slots.json"


class CopySlots:
    """Which source words, numbers and codes become slots, learned from the training pairs; saved beside the
    tokenizer."""

    def __init__(self, copied: Iterable[str], known: Iterable[str], caseless_source: bool = False,
                 translated_inside: Iterable[str] | None = None, per_kind: int = SLOTS_PER_KIND) -> None:
        self.copied = set(copied)  # name-like words the training pairs keep verbatim more often than not
        self.known = set(known)  # every source word of the training pairs, lower-cased
        self.caseless_source = caseless_source  # the source language's script has no letter case
        # Capitalized words the pairs hold inside a sentence and translate there more often than not;
        # None for slots saved before the rule (then every known word stays a word, as it did).
        self.translated_inside = None if translated_inside is None else set(translated_inside)
        self.per_kind = per_kind
        self.draw = random.Random()  # a training pair's draws, seeded by its text (``pair_slots``)

    @staticmethod
    def _name_like(word: str) -> bool:
        """A candidate for a slot: with a capital letter, or in a script without case."""
        if word.isascii():  # letters only: a capital is there exactly when not all are lower case
            return not word.islower()
        return not cased(word[0]) or any(c.isupper() for c in word)

    @classmethod
    def learn(cls, pairs: Sequence[tuple[str, str]], min_count: int = 2) -> "CopySlots":
        """Read from ``(source, target)`` training pairs: which name-like words they copy (in ``min_count``
        pairs or more, at least half of those that hold them), which capitalized words they translate inside
        a sentence, and every source word they hold. Counted on every core."""
        seen, kept, inside, kept_inside, known, scripts = Counter(), Counter(), Counter(), Counter(), set(), Counter()
        for part in in_processes(cls._counted, pairs, "learning copy slots"):
            for total, counted in zip((seen, kept, inside, kept_inside, known, scripts), part):
                total.update(counted)
        return cls({w for w, n in kept.items() if n >= min_count and 2 * n >= seen[w]}, known,
                   caseless_source=scripts[False] > scripts[True],
                   translated_inside={w for w, n in inside.items() if 2 * kept_inside[w] < n})

    @classmethod
    def _counted(cls, pairs: Sequence[tuple[str, str]]) -> tuple[Counter, Counter, Counter, Counter, set, Counter]:
        """``learn``'s counts over ``pairs``: name-like words seen and kept, the same inside a sentence, every
        source word, and words of cased scripts against the others."""
        seen, kept, inside, kept_inside, known, scripts = Counter(), Counter(), Counter(), Counter(), set(), Counter()
        for source, target in pairs:
            words = [token for token in tokens(source) if token.kind == "word"]
            known.update(part.lower() for token in words for part in re.split(f"[{JOINERS}]", token.text))
            scripts.update(cased(token.text[0]) for token in words)  # True: a word of a cased script
            in_target = {token.text for token in tokens(target)}
            for word in {token.text for token in words if cls._name_like(token.text)}:
                seen[word] += 1
                kept[word] += word in in_target
            for word in {token.text for token in words if not token.first and cased(token.text[0])
                         and cls._name_like(token.text)}:
                inside[word] += 1
                kept_inside[word] += word in in_target
        return seen, kept, inside, kept_inside, known, scripts

    def is_slot(self, token: Token) -> bool:
        """Numbers and codes always; words by the rules of the module's docstring."""
        word = token.text
        if token.kind != "word" or word in self.copied:
            return True
        if word.islower() and word.isascii():  # most words: lower-case Latin letters, never a name (the rules below)
            return False
        if not cased(word[0]):  # 张伟 in English text: foreign, a name; in a caseless source, only if copied
            return not self.caseless_source and word not in self.known
        if not self._name_like(word):
            return False
        if any(joiner in word for joiner in JOINERS):  # Marie-Claire, O'Neill: every part as inside a name
            parts = [part for part in re.split(f"[{JOINERS}]", word) if len(part) > 1]
            return bool(parts) and all(self.is_slot(Token(token.start, "word", part)) for part in parts)
        if token.first or self.translated_inside is None or word.isupper():  # "I", "USA", shouting: as known
            return word.lower() not in self.known
        return word not in self.translated_inside

    def knows(self, word: str) -> bool:
        """The training pairs hold ``word``, in any case."""
        return word.lower() in self.known

    def entities(self, source: str) -> dict[str, str]:
        """The slot of each distinct name, number and code of ``source`` a translation should copy, in order
        of appearance: ``{"Oluwaseun": "<name1>", "530": "<num1>"}``."""
        slots, counts = {}, Counter()
        for token in filter(self.is_slot, tokens(source)):
            kind = "num" if token.kind == "num" else "name"  # a code is copied as a name is
            if token.text not in slots and counts[kind] < self.per_kind:
                counts[kind] += 1
                slots[token.text] = f"<{kind}{counts[kind]}>"
        return slots

    def pair_slots(self, source: str, target: str | None) -> dict[str, str]:
        """A training pair's slots: only what its target holds verbatim, numbered again in source order (or
        from a random set of slots), none for ``UNSLOTTED_SHARE`` of the pairs; the draws are the pair's own
        (a hash of its text), the same in every run. Without a target (translation, evaluation), every
        entity of the source."""
        if target is None:
            return self.entities(source)
        draw = self.draw
        draw.seed(zlib.crc32(f"{source}\t{target}".encode()))
        if draw.random() < UNSLOTTED_SHARE:
            return {}
        entities = self.entities(source)
        if not entities:  # most pairs: nothing to copy, the target need not be read
            return {}
        in_target = {token.text for token in tokens(target)}
        kept = [(text, slot[1:-1].rstrip("0123456789")) for text, slot in entities.items()
                if text in in_target]  # (entity, kind) in source order
        shuffled = draw.random() < RANDOM_NUMBERING_SHARE
        numbers = {kind: iter(sorted(draw.sample(range(1, self.per_kind + 1), n)) if shuffled else range(1, n + 1))
                   for kind, n in Counter(kind for _, kind in kept).items()}
        return {text: f"<{kind}{next(numbers[kind])}>" for text, kind in kept}

    @staticmethod
    def mask(text: str, slots: dict[str, str]) -> str:
        """``text`` with every whole occurrence of a slot's entity replaced by its token."""
        if not slots:
            return text
        pieces, end = [], 0
        for token in tokens(text):
            if token.text in slots and token.start >= end:
                pieces += [text[end : token.start], slots[token.text]]
                end = token.start + len(token.text)
        return "".join(pieces) + text[end:]

    @classmethod
    def restore(cls, text: str, slots: dict[str, str], source: str | None = None) -> str:
        """A translation's slot tokens replaced by what they stand for. A slot the source did not have is
        dropped; given the ``source``, a slot the translation repeats is kept as often as the source holds
        it, and one it dropped is put back beside the slot it followed in the source."""
        entity_of = {token: entity for entity, token in slots.items()}
        if source is not None:
            text = cls.repaired(text, slots, source)

        def put(match: re.Match) -> str:  # a dropped slot takes the space before it along
            space, token = match.groups()
            return space + entity_of[token] if token in entity_of else ""
        return SLOT.sub(put, text)

    @staticmethod
    def repaired(text: str, slots: dict[str, str], source: str) -> str:
        """A translation still holding its slot tokens, with each of the source's slots as often as the source
        holds it: a repeat stands for the first slot missing (the model wrote ``<num1> y <num1>`` for
        ``<num1> and <num2>``) or goes; a slot still missing is put after the slot before it in the source
        (or before the closing punctuation)."""
        allowed = Counter(slots[token.text] for token in tokens(source) if token.text in slots)
        order = list(slots.values())  # source order
        missing = [slot for slot in order if slot not in text]
        used = Counter()

        def keep(match: re.Match) -> str:
            space, slot = match.groups()
            used[slot] += 1
            if used[slot] <= allowed[slot]:
                return match.group()
            return space + missing.pop(0) if missing else ""
        text = SLOT.sub(keep, text)
        entity_of = {slot: entity for entity, slot in slots.items()}
        for slot in missing:
            before = next((s for s in reversed(order[: order.index(slot)]) if s in text), None)
            if before is not None:  # joined as the source joins the two: "12, 15" or "Ana Lima"
                at = text.index(before) + len(before)
                joint = ", " if f"{entity_of[before]}, {entity_of[slot]}" in source else " "
                text = f"{text[:at]}{joint}{slot}{text[at:]}"
            else:  # nothing before it came through: before the line's closing punctuation
                body = text.rstrip(".!?…。")
                text = f"{body} {slot}{text[len(body):]}"
        return text

    def save(self, folder: str | os.PathLike) -> Path:
        path = Path(folder) / FILE
        saved = {"copied": sorted(self.copied), "known": sorted(self.known), "caseless_source": self.caseless_source}
        if self.translated_inside is not None:  # slots of before stay as they were
            saved |= {"translated_inside": sorted(self.translated_inside), "slots_per_kind": self.per_kind}
        path.write_text(json.dumps(saved, ensure_ascii=False))
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "CopySlots | None":
        """The slots saved in ``folder``; ``None`` for a tokenizer trained without them. A file of before
        (no ``slots_per_kind``) keeps the rules and the six slots per kind it was trained with."""
        path = Path(folder) / FILE
        if not path.is_file():
            return None
        saved = json.loads(path.read_text())
        return cls(saved["copied"], saved["known"], saved.get("caseless_source", False),
                   saved.get("translated_inside"), saved.get("slots_per_kind", SLOTS_PER_KIND_BEFORE))
