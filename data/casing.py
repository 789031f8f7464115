"""Capitals the model never saw: a sentence in ALL CAPS or Title Case is read in sentence case, and its
translation is given the style back in the target language's way.

    "DO NOT TELL TOM."          → "Do not tell Tom."          → "No se lo digas a Tom."  → "NO SE LO DIGAS A TOM."
    "The Best Restaurants In Town" → "The best restaurants in town" → "Los mejores restaurantes de la ciudad"

The corpus holds one sentence-case sentence a line, so a model trained on it reads "ENTER" as bytes it has
never seen and "Restaurants" inside a sentence as a name. Which words keep their capital in sentence case
is what the training text says (``TranslationTokenizer``): the names its pairs copy (Tom) and the words its
BPE spells more readily capitalized (London, Monday, I); another word it holds is lowered; a word it never
holds keeps its capitals (an acronym, or a name: copied as it is). A Spanish heading is written in
sentence case, an English one in Title Case; ALL CAPS stays ALL CAPS in every language.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from data.entities import WORD, cased

if TYPE_CHECKING:  # what the training text says of a word's capitals
    from data.tokenizer import TranslationTokenizer as Vocabulary

CAPS, TITLE = "caps", "title"
# Words a Title Case heading may leave in lower case ("Gone with the Wind"), and English titles do.
SMALL_WORDS = frozenset("a an and as at but by for from in into nor of on or over the to up with".split())
# Languages whose headings are in Title Case: only there is a line of capitalized words read as one (German
# capitalizes every noun, "Guten Morgen."; Spanish and French headings are in sentence case).
TITLE_CASE_LANGUAGES = frozenset({"en"})


def style(sentence: str, language: str = "en", vocabulary: Vocabulary | None = None) -> str | None:
    """``CAPS`` for a sentence in capitals (two words or more, or one of four letters or more the ``vocabulary``
    writes in lower case: "STOP!", not "USA"), ``TITLE`` for one of a ``language`` that writes headings in Title Case whose every word
    after the first is capitalized (but small words), else None."""
    initials = [(piece[i], piece) for piece in sentence.split()  # each cased word's first letter
                if (i := _first_letter(piece)) is not None and cased(piece[i])]
    if not any(c.islower() for c in sentence if cased(c)):
        words = [piece for _, piece in initials if sum(map(str.isalpha, piece)) > 1]
        # One word: a shout or a label ("STOP!", "WARNING:") where the text writes it lowered and it is no short
        # acronym (USA, UN, TV: a joint vocabulary holds "usa" and "un" as Spanish words).
        word = _bare(words[0]).upper() if len(words) == 1 else ""
        shouted = len(word) >= 4 and vocabulary is not None and vocabulary.written_lower(word)
        return CAPS if len(words) >= 2 or shouted else None
    later = [letter for letter, piece in initials[1:] if letter.isupper() or _bare(piece) not in SMALL_WORDS]
    titled = language in TITLE_CASE_LANGUAGES and later and all(letter.isupper() for letter in later)
    return TITLE if titled else None


def _first_letter(piece: str) -> int | None:
    return next((i for i, c in enumerate(piece) if c.isalpha()), None)


def _bare(piece: str) -> str:
    return piece.strip(".,;:!?\"'“”‘’«»()[]¿¡").lower()


def sentence_cased(sentence: str, vocabulary: Vocabulary | None) -> str:
    """``sentence`` (in ``CAPS`` or ``TITLE``) in sentence case: its first word capitalized, every other word
    as the training pairs hold it inside a sentence (lowered without a ``vocabulary``)."""
    first = WORD.search(sentence)  # the sentence's first word

    def recased(match: re.Match) -> str:
        word = match.group()
        if not cased(word[0]):
            return word
        capitalized = word[0] + word[1:].lower()
        if match.start() and sentence[match.start() - 1] in "'’":  # DON'T, TOM'S: the rest of a word
            return word.lower()
        if match.start() == first.start():
            return capitalized
        if vocabulary is None:
            return word.lower()
        if vocabulary.capitalized_inside(capitalized):
            return capitalized
        if vocabulary.knows(word):
            return word.lower()
        return word  # not in the corpus: an acronym or a name, copied as it stands

    return WORD.sub(recased, sentence)


def restyled(translation: str, sentence_style: str | None, target_lang: str) -> str:
    """A translation of a sentence-cased sentence, in the style its source had, as the target writes it."""
    if sentence_style == CAPS:
        return translation.upper()
    if sentence_style == TITLE and target_lang in TITLE_CASE_LANGUAGES:
        return title_cased(translation, keep_small=True)
    return translation


def title_cased(text: str, keep_small: bool = False) -> str:
    """Every word's first letter a capital (``keep_small``: but small words after the first), as headings and
    Marian's title-case augmentation write them; apostrophes stay inside a word ("Don't")."""
    pieces = re.split(r"(\s+)", text)
    words = [(i, piece) for i, piece in enumerate(pieces) if piece and not piece.isspace()]
    for n, (i, piece) in enumerate(words):
        letter = _first_letter(piece)
        if letter is None or (keep_small and n and _bare(piece) in SMALL_WORDS):
            continue
        pieces[i] = piece[:letter] + piece[letter].upper() + piece[letter + 1 :]
    return "".join(pieces)
