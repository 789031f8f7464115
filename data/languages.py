"""The language pair a run translates: two ISO 639-1 codes, named once in the data settings, and how words
are found in a language's text (the BLEU tokenizer).

Everything downstream (log lines, the page, the model card, the exports) reads the pair from the run
folder's ``config.yaml`` and names it with ``LanguagePair.describe``; a run trained before the pair was
a setting reads as English→Spanish.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

log = logging.getLogger(__name__)

NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "ca": "Catalan", "cs": "Czech", "da": "Danish", "de": "German",
    "el": "Greek", "en": "English", "eo": "Esperanto", "es": "Spanish", "et": "Estonian", "eu": "Basque",
    "fa": "Persian", "fi": "Finnish", "fr": "French", "ga": "Irish", "he": "Hebrew", "hi": "Hindi",
    "hr": "Croatian", "hu": "Hungarian", "hy": "Armenian", "id": "Indonesian", "is": "Icelandic",
    "it": "Italian", "ja": "Japanese", "ka": "Georgian", "km": "Khmer", "ko": "Korean", "lo": "Lao",
    "lt": "Lithuanian", "lv": "Latvian", "mk": "Macedonian", "my": "Burmese", "nb": "Norwegian Bokmål",
    "nl": "Dutch", "no": "Norwegian", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian",
    "sk": "Slovak", "sl": "Slovenian", "sr": "Serbian", "sv": "Swedish", "th": "Thai", "tr": "Turkish",
    "uk": "Ukrainian", "vi": "Vietnamese", "zh": "Chinese",
}
# manythings.org names its downloads by ISO 639-3 codes (nld-eng.zip holds nld.txt); Chinese is Mandarin's.
THREE_LETTER = {
    "ar": "ara", "bg": "bul", "ca": "cat", "cs": "ces", "da": "dan", "de": "deu", "el": "ell", "eo": "epo",
    "es": "spa", "et": "est", "eu": "eus", "fa": "pes", "fi": "fin", "fr": "fra", "he": "heb", "hi": "hin",
    "hr": "hrv", "hu": "hun", "hy": "hye", "id": "ind", "is": "isl", "it": "ita", "ja": "jpn", "ka": "kat",
    "km": "khm", "ko": "kor", "lt": "lit", "lv": "lvs", "mk": "mkd", "nb": "nob", "nl": "nld", "pl": "pol",
    "pt": "por", "ro": "ron", "ru": "rus", "sk": "slk", "sl": "slv", "sr": "srp", "sv": "swe", "th": "tha",
    "tr": "tur", "uk": "ukr", "vi": "vie", "zh": "cmn",
}
# Scripts written without spaces between words (Thai, Lao, Burmese, Khmer, kana, CJK ideographs): there a word is
# no whitespace-separated piece, and a character stands for about one.
UNSPACED_SCRIPT = re.compile(r"[\u0E00-\u0EFF\u1000-\u109F\u1780-\u17FF\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF]")


def word_count(text: str) -> int:
    """Words of ``text``: its whitespace-separated pieces, each character of a script without spaces one."""
    return sum(max(len(UNSPACED_SCRIPT.findall(piece)), 1) for piece in text.split())


CODE = re.compile(r"[a-z]{2,3}")  # ISO 639-1, or 639-3 for a language without a two-letter code
# sacreBLEU's tokenizer for a language written without spaces between words; 13a for the rest. A MeCab
# tokenizer needs its package (sacrebleu[ja] / [ko]); without it, characters stand in for Japanese words.
BLEU_TOKENIZERS = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab", "th": "char", "lo": "char", "km": "char",
                   "my": "char"}
MECAB_PACKAGES = {"ja-mecab": "MeCab", "ko-mecab": "mecab_ko"}


def language_name(code: str) -> str:
    """``nl`` → ``Dutch``; a code not in the table is its own name."""
    return NAMES.get(code, code)


def download_language(file_name: str) -> str | None:
    """The language a manythings file name says besides English (``nld-eng.zip``, ``nld.txt`` → ``nl``), if any."""
    stem = PurePosixPath(file_name).name.split(".")[0].removesuffix("-eng")
    return next((two for two, three in THREE_LETTER.items() if three == stem), stem if stem in NAMES else None)


@dataclass(frozen=True)
class LanguagePair:
    """Which language a run reads (``source``) and which it writes (``target``)."""

    source: str = "en"
    target: str = "es"

    def describe(self, arrow: str = "→") -> str:
        """``English→Dutch``."""
        return arrow.join(self.names)

    @property
    def names(self) -> tuple[str, str]:
        """``("English", "Dutch")``."""
        return language_name(self.source), language_name(self.target)

    @property
    def codes(self) -> str:
        """``en-nl``: for names of files and models."""
        return f"{self.source}-{self.target}"

    def other_than_english(self) -> str | None:
        """The language a Tatoeba download pairs with English; None when neither side is English."""
        if "en" not in (self.source, self.target) or self.source == self.target:
            return None
        return self.target if self.source == "en" else self.source

    def tatoeba_names(self) -> tuple[str, ...]:
        """The file names manythings.org gives this pair's download, zipped and unzipped (``nld-eng.zip``,
        ``nld.txt``); none for a pair without English."""
        other = self.other_than_english()
        if other is None:
            return ()
        code = THREE_LETTER.get(other, other)
        return f"{code}-eng.zip", f"{code}.txt", f"{code}-eng/{code}.txt"


@functools.lru_cache(maxsize=None)  # decided (and said) once per language
def bleu_tokenizer(language: str) -> str:
    """The sacreBLEU tokenizer that finds words in ``language``'s text (``zh``, ``ja-mecab`` or ``char``, ``13a``)."""
    name = BLEU_TOKENIZERS.get(language, "13a")
    if name in MECAB_PACKAGES and importlib.util.find_spec(MECAB_PACKAGES[name]) is None:
        fallback = "char" if language == "ja" else "13a"
        log.warning("BLEU on %s text uses sacreBLEU's %s tokenizer: its %s tokenizer needs the %s package",
                    language, fallback, name, MECAB_PACKAGES[name])
        return fallback
    return name


def pair_problems(source: object, target: object, prefix: str = "") -> list[str]:
    """What is wrong with a pair's settings, one phrase each (empty when both are codes and they differ)."""
    problems = [f"{prefix}{key}={value!r} must be a language code such as en, es, nl (ISO 639-1)"
                for key, value in (("source_lang", source), ("target_lang", target))
                if not isinstance(value, str) or not CODE.fullmatch(value)]
    if not problems and source == target:
        problems.append(f"{prefix}source_lang and {prefix}target_lang are both {source!r}: a pair needs two languages")
    return problems


def pair_of(data_settings: dict | None) -> LanguagePair:
    """The pair a run's ``data`` settings name; English→Spanish where they name none (older runs)."""
    settings = data_settings or {}
    return LanguagePair(str(settings.get("source_lang") or "en"), str(settings.get("target_lang") or "es"))
