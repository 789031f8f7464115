"""A line as people paste it, cut into what the model translates and what stays as it is, then put back.

    "2. Attention: Keep your ticket. DO NOT ENTER."
     └┬┘└──┬────┘└┬┘└───────┬─────────┘└┬──────────┘
    kept label  kept    sentence    sentence (read as "Do not enter.", written back in capitals)

The model was trained on one short sentence a line, so that is what it is given: a maintained segmenter
(``sentencex``: ~300 languages, a plain rule for the rest, every character given back) cuts the line
into sentences; a list marker (``-``, ``*``, ``•``, ``1.``, ``1)``, ``a)``, ``#``, ``>``) and the spacing
between sentences stay as they are, a label before a colon ("Attention:", "Note:") is translated on its
own, a tab separates cells translated apart; a sentence longer than the model reads is cut at its inner
punctuation (``;``, ``:``, ``,``, dashes) into pieces that fit. The translations are joined back with the
line's own spacing (none between sentences for a target written without spaces: ja, zh), so a line
gives one line. Thai and Lao, with no full stop, end a sentence with a space. A sentence in capitals is read in
sentence case (``data/casing.py``); a piece without closing punctuation (a word, a heading, a label) is read with
a full stop, as every training sentence ends, and written back without it.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import accumulate
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from sentencex import segment

from data.casing import restyled, sentence_cased, style

if TYPE_CHECKING:
    from data.casing import Vocabulary

LIST_MARKER = re.compile(r"\s*(?:[-*•‣◦▪–—>]|#{1,6}|\(?\d{1,3}[.)]|\(?[a-z][.)]|\([A-Z]\))\s+")
# A label: up to three words at a sentence's start, a colon, then a capital (or a quote and a capital).
LABEL = re.compile(r"([^\W\d_][\w'’-]*(?: [\w'’-]+){0,2})(:\s+)(?=[\"'“‘«„]?[¿¡]?([^\W\d_]))")
QUOTES = {'"': '"', "“": "”", "„": "“", "«": "»", "‘": "’", "'": "'", "「": "」", "『": "』"}  # opening: closing
INNER_BREAK = re.compile(r"\s*[;:,]\s+|\s+[-–—]\s+")  # where an over-long sentence may be cut
ENDS_A_SENTENCE = ".!?…。！？।॥։။។؟۔"  # Latin, CJK, Devanagari, Armenian, Burmese, Khmer, Arabic, Urdu
CLOSERS = "\"'”’»)]」』）】"  # after a sentence's stop: "Wait here." (Stop.)
# Written without spaces between sentences. (Thai, Lao, Khmer and Burmese write no spaces between words, but
# one between sentences: Thai has no full stop.)
UNSPACED_TARGETS = frozenset({"ja", "zh"})
SPACE_ENDS_A_SENTENCE = frozenset({"th", "lo"})  # no full stop: a space between words of the script ends one
# The full stop a piece ending in a word is read with: nearly every sentence of a Tatoeba corpus ends in a stop, a
# question or an exclamation mark (all but 2 English sides of 112,000), and a word or a heading read bare comes
# out long ("Open the door" -> "Abre la puerta de la puerta"). Its translation loses the stop again (``ended_as``).
FULL_STOPS = {"ja": "。", "zh": "。", "hi": "।", "hy": "։", "my": "။", "km": "។", "th": "", "lo": ""}  # else "."
WRITTEN_STOPS = (".", *filter(None, FULL_STOPS.values()))  # what ``ended_as`` takes off

T = TypeVar("T")


@dataclass(frozen=True)
class Piece:
    """A part of a line: text for the model (``translated``), or kept as it stands (spacing, a list marker)."""

    text: str  # as it stands in the line
    translated: bool = False
    style: str | None = None  # data/casing.py's CAPS or TITLE: read in sentence case, written back in style
    model_text: str = ""  # what the model reads: ``text``, in sentence case where it has a style, a stop after a word


@dataclass
class LineSplitter:
    """Cuts lines of the ``source_lang`` into pieces and joins their translations into ``target_lang`` lines.
    ``fits``: whether a text fits the model's source length (a longer sentence is cut at inner punctuation);
    ``vocabulary``: how the training text writes each word's capitals (``TranslationTokenizer``)."""

    source_lang: str
    target_lang: str
    vocabulary: Vocabulary | None = None
    fits: Callable[[str], bool] = lambda text: True

    def pieces(self, line: str) -> list[Piece]:
        """The line's pieces, in order; their texts joined give the line back."""
        found = []
        for n, cell in enumerate(line.split("\t")):
            found += [Piece("\t")] * (n > 0) + self._cell(cell)
        return [piece for piece in found if piece.text]

    def _cell(self, text: str) -> list[Piece]:
        lead = (LIST_MARKER.match(text) or re.match(r"\s*", text)).group()
        found = [Piece(lead)]
        for sentence in self._segments(text[len(lead) :]):
            body = sentence.strip()  # spacing alone: its empty pieces are dropped by ``pieces``, the spacing kept
            start = sentence.index(body)
            found.append(Piece(sentence[:start]))
            label = LABEL.match(body)
            if label and body[0].isupper() and label.group(3).isupper():
                found += [self._sentence(label.group(1)), Piece(label.group(2))]
                body = body[label.end() :]
            found += self._quoted(body) + [Piece(sentence[start + len(sentence.strip()) :])]
        return found

    def _quoted(self, text: str) -> list[Piece]:
        """A sentence in quotes is translated without them (the model learned sentences), its quotes kept."""
        closing = QUOTES.get(text[:1])
        if closing and len(text) > 2 and text.endswith(closing) and closing not in text[1:-1]:
            return [Piece(text[0]), *self._fitted(text[1:-1]), Piece(text[-1])]
        return self._fitted(text)

    def _sentence(self, text: str) -> Piece:
        kind = style(text, self.source_lang, self.vocabulary)
        read = sentence_cased(text, self.vocabulary) if kind else text
        last = last_mark(text)  # a word's (a letter, a digit, a vowel sign), not a stop or a colon
        bare = bool(last) and unicodedata.category(last)[0] in "LNM"
        return Piece(text, True, kind, read.rstrip() + FULL_STOPS.get(self.source_lang, ".") if bare else read)

    def _fitted(self, text: str) -> list[Piece]:
        """``text`` as one sentence, or cut at inner punctuation into pieces that each fit, as few as can (measured
        as the model reads them: a line in capitals, in sentence case)."""
        if not text or self.fits(self._sentence(text).model_text):
            return [self._sentence(text)] if text else []
        cuts = [(m.start(), m.end()) for m in INNER_BREAK.finditer(text)]
        found, start = [], 0
        for n, (at, after) in enumerate(cuts):  # a cut is made where the next part would not fit
            following = cuts[n + 1][0] if n + 1 < len(cuts) else len(text)
            if not self.fits(self._sentence(text[start:following]).model_text):
                found += [self._sentence(text[start:at]), Piece(text[at:after])]
                start = after
        return found + [self._sentence(text[start:])]

    def sentence_count(self, line: str) -> int:
        """How many sentences the segmenter finds in ``line`` (microseconds: a server asks for every request)."""
        return sum(1 for sentence in self._segments(line) if sentence.strip())

    def _segments(self, text: str) -> Iterator[str]:
        """The segmenter's sentences of ``text`` (every character given back); in Thai and Lao, cut at spaces too."""
        for sentence in segment(self.source_lang, text):
            yield from re.split(r"(?<!\s)(?=\s+\S)", sentence) if self.source_lang in SPACE_ENDS_A_SENTENCE \
                else [sentence]

    def join(self, pieces: list[Piece], translations: Iterable[str]) -> str:
        """The line again, each translated piece replaced by its translation (``translations`` in order), in
        its source's style; what was kept stands as it was."""
        return self.placed(pieces, translations)[0]

    def placed(self, pieces: list[Piece], translations: Iterable[str]) -> tuple[str, list[tuple[int, str]]]:
        """``join``'s line, and where each translation stands in it: (its first character, its text as written)."""
        translations, line, placed, last_translated = iter(translations), "", [], False
        unspaced = self.target_lang in UNSPACED_TARGETS
        for piece in pieces:
            if piece.translated:
                if last_translated and not unspaced:
                    line += " "  # sentences the source wrote without a space between them
                placed.append((len(line), ended_as(piece.text, restyled(next(translations), piece.style,
                                                                        self.target_lang))))
                line += placed[-1][1]
            elif not (unspaced and last_translated and piece.text.isspace() and "\t" not in piece.text):
                # (else the next sentence follows at once; a tab between cells stays)
                line += piece.text
            last_translated = piece.translated
        return (re.sub(r"[^\S\t]+$", "", line) if unspaced else line), placed  # spaces after the last sentence


def last_mark(text: str) -> str:
    """The last character of ``text`` before its closing quotes and brackets ("" for none)."""
    return text.rstrip().rstrip(CLOSERS)[-1:]


def ended_as(source: str, translation: str) -> str:
    """A translation of a piece with no closing punctuation (a heading, a label, a cut part) loses the full
    stop at its end: the pipeline read the piece with one (``FULL_STOPS``), and the model writes one anyway."""
    if last_mark(source) not in ENDS_A_SENTENCE and translation.endswith(WRITTEN_STOPS) and not translation.endswith(".."):
        return translation[:-1]
    return translation


def translate_pieces(lines: list[list[Piece]], translate: Callable[[list[str]], list[T]]) -> list[list[T]]:
    """Every translated piece of ``lines`` through ``translate`` in one call, each distinct text once: its
    results per line, in the order of the line's translated pieces."""
    distinct = list(dict.fromkeys(piece.model_text for pieces in lines for piece in pieces if piece.translated))
    done = dict(zip(distinct, translate(distinct), strict=True))
    return [[done[piece.model_text] for piece in pieces if piece.translated] for pieces in lines]


def translated_at(pieces: list[Piece]) -> list[tuple[int, str]]:
    """Where each translated piece stands in its line: (its first character, its text)."""
    starts = accumulate((len(piece.text) for piece in pieces), initial=0)
    return [(start, piece.text) for start, piece in zip(starts, pieces) if piece.translated]
