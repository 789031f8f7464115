"""The pieces of a line that copy slots are made of: numbers, codes and words, each read whole.

    "Flight LH2045 takes Marie-Claire and 3 friends to <name1>."
            └code ┘    └ one word ─┘    num              └code: typed slot syntax, copied as text

A number is whole ("530", not in "1,530"), and so is a list of three or more ("12, 15, 18"); a code
mixes letters and digits (``LH2045``, ``12C``, ``PS5``, ``COVID-19``), or is slot syntax typed by a user,
and is copied whole; a word is a run of letters cut where the script's casing changes (``私はTomです`` →
私は · Tom · です), and capitalized words joined by a hyphen or an apostrophe (``Marie-Claire``, ``O'Neill``)
are one. "4th", "10am" and "1990s" are numbers with a suffix, not codes. Each token knows whether it
begins a sentence: a capital there says nothing about a name.
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import NamedTuple

WORD = re.compile(r"[^\W\d_]+")  # a run of letters of any script
ASCII_DIGIT = re.compile(r"[0-9]")  # (in ASCII text, what ``str.isdigit`` finds)
NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")  # 7, 1999, 1,250, 10:45, 555-0199
# Three or more numbers in a row, ", " between them, are one entity: a list copied as it stands. A model
# trained on lines of one or two numbers writes a line of ten slots as noise; one slot it writes well.
NUMBERS = re.compile(rf"{NUMBER.pattern}(?:, {NUMBER.pattern}){{2,}}|{NUMBER.pattern}")
TYPED_SLOT = re.compile(r"<(?:name|num)\d+>")  # what a slot token looks like, typed as text
RUN = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*")  # Latin letters and digits, pieces joined by inner hyphens
JOINERS = "-'’"  # Marie-Claire, O'Neill, D’Souza
# Where a capital may be the sentence's: the line's start, after . ! ? : (closing quotes) and a space, or
# after an opening quote ('She said: "Wait here."', 'He asked, "Where?"').
SENTENCE_START = re.compile(r"(?:^|[.!?…:][\"'”’»)\]]*\s+|\s(?=[\"“‘«]))[\"'“‘«¿¡(\[]*")


class Token(NamedTuple):
    """One number, code or word of a line."""

    start: int
    kind: str  # "num", "code" or "word"
    text: str
    first: bool = False  # begins a sentence


@functools.lru_cache(maxsize=None)
def cased(letter: str) -> bool:
    """A letter of a script with case (Latin, Greek, Cyrillic, Armenian)."""
    return letter.lower() != letter.upper()


def _code_piece(piece: str) -> bool:
    """A piece of a code: digits, or letters with a capital or a digit after them (PS5, mp3, COVID); not a
    lower-case word or a number's suffix ("year" of "10-year-old", "4th", "10am")."""
    return piece.isdigit() or any(c.isupper() for c in piece) or re.search(r"[^\W\d_]\d", piece) is not None


def _codes(text: str) -> list[Token]:
    """Typed slot syntax and runs mixing letters and digits whose every piece is a code's."""
    found = [Token(m.start(), "code", m.group()) for m in TYPED_SLOT.finditer(text)]
    typed = [(token.start, token.start + len(token.text)) for token in found]
    for match in RUN.finditer(text):
        run = match.group()
        if (any(c.isdigit() for c in run) and any(c.isalpha() for c in run) and all(map(_code_piece, run.split("-")))
                and not any(a <= match.start() < b for a, b in typed)):
            found.append(Token(match.start(), "code", run))
    return found


def _words(text: str, taken: list[tuple[int, int]], digits: bool = True) -> list[tuple[int, str]]:
    """Runs of letters outside ``taken`` spans and touching no digit, capitalized ones joined across a
    hyphen or an apostrophe, mixed scripts cut where the casing changes (``digits``: the text may hold one)."""
    words: list[tuple[int, str]] = []
    for match in WORD.finditer(text):
        start, word = match.start(), match.group()
        if not (taken or digits) and word.isascii() and not (words and word[0].isupper()):
            words.append((start, word))  # most words: nothing to skip, join or cut
            continue
        if taken and any(a <= start < b for a, b in taken):
            continue
        if words and word[0].isupper() and _joined(text, *words[-1], start) and \
                not (digits and _touches_a_digit(text, start, match.end())):
            words[-1] = (words[-1][0], text[words[-1][0] : match.end()])
            continue
        # A word of one script inside another's text is a word: 私はTomです → 私は · Tom · です
        for piece in [word] if word.isascii() else ["".join(p) for _, p in itertools.groupby(word, key=cased)]:
            if not (digits and _touches_a_digit(text, start, start + len(piece))):
                words.append((start, piece))
            start += len(piece)
    return words


def _joined(text: str, last_start: int, last: str, start: int) -> bool:
    """The word at ``start`` continues the capitalized ``last`` across one hyphen or apostrophe."""
    end = last_start + len(last)
    return start == end + 1 and text[end] in JOINERS and last[0].isupper()


def _touches_a_digit(text: str, start: int, end: int) -> bool:
    return any(c.isdigit() or c == "_" for c in text[max(start - 1, 0) : start] + text[end : end + 1])


@functools.lru_cache(maxsize=4096)  # a line is read several times in a row: its slots, then masked by them
def tokens(text: str) -> tuple[Token, ...]:
    """The codes, numbers and words of ``text`` in order."""
    starts = {m.end() for m in SENTENCE_START.finditer(text)}
    digits = ASCII_DIGIT.search(text) if text.isascii() else any(map(str.isdigit, text))
    if "_" not in text and not digits:  # most lines: no number, code or typed slot, only words
        word = tuple.__new__  # (a Token made without NamedTuple's Python-level constructor: a line has many)
        return tuple([word(Token, (start, "word", found, start in starts))
                      for start, found in _words(text, [], digits=False)])
    found = _codes(text)
    taken = [(token.start, token.start + len(token.text)) for token in found]
    found += [Token(m.start(), "num", m.group()) for m in NUMBERS.finditer(text)
              if not any(a < m.end() and m.start() < b for a, b in taken)]
    found += [Token(start, "word", word, start in starts) for start, word in _words(text, taken)]
    return tuple(sorted(found))


def contains(text: str, entity: str) -> bool:
    """``entity`` stands in ``text`` whole: as a word, a number or a code of its own."""
    return any(token.text == entity for token in tokens(text))
