"""A translation memory (TMX, what CAT tools and OPUS export) read as sentence pairs as it streams (expat, nothing
fetched): each unit's segments in the run's two languages by the primary subtag of ``xml:lang``, inline codes
(``<bpt>``, ``<ph>``, ...) dropped with their content and counted; what is refused: docs/configuration.md."""

from __future__ import annotations

import re
from pathlib import Path
from xml.parsers import expat

from data.corpus import CorpusError
from data.languages import LanguagePair

INLINE_CODES = frozenset({"bpt", "ept", "ph", "it", "ut"})
LANG_ATTRIBUTES = ("http://www.w3.org/XML/1998/namespace lang", "xml:lang", "lang")


def is_tmx(path: Path) -> bool:
    """A file whose first kilobyte (in UTF-8 or UTF-16) holds a ``<tmx`` element."""
    with path.open("rb") as file:
        head = file.read(1024)
    encodings = ("utf-16", "utf-8") if head[:2] in (b"\xff\xfe", b"\xfe\xff") else ("utf-8",)
    return any("<tmx" in head.decode(encoding, "ignore") for encoding in encodings)


class TmxReader:
    """Expat's handlers for one file: each unit's segments by language, the inline codes dropped."""

    def __init__(self, pair: LanguagePair) -> None:
        self.pair, self.languages = pair, set()
        self.units: list[tuple[int, str | None, str | None]] = []  # (line, source, target) of each unit, in order
        self.tags_dropped, self._unit, self._language, self._segment, self._code_depth = 0, None, None, None, 0
        self.parser = expat.ParserCreate(namespace_separator=" ")
        self.parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)  # nothing fetched
        self.parser.StartElementHandler, self.parser.EndElementHandler = self._start, self._end
        self.parser.CharacterDataHandler = self._text

    def _start(self, name: str, attributes: dict[str, str]) -> None:
        name = name.rsplit(" ", 1)[-1]
        if name == "tu":
            self._unit = (self.parser.CurrentLineNumber, {})
        elif name == "tuv" and self._unit is not None:
            tag = next((attributes[a] for a in LANG_ATTRIBUTES if a in attributes), "")
            self._language = re.split(r"[-_]", tag.strip(), maxsplit=1)[0].lower()  # en-US, EN_gb, en → en
            self.languages.add(self._language)
        elif name == "seg" and self._language is not None:
            self._segment = []
        elif name in INLINE_CODES and self._segment is not None:
            self._code_depth += 1
            self.tags_dropped += 1

    def _text(self, data: str) -> None:
        if self._segment is not None and not self._code_depth:
            self._segment.append(data)

    def _end(self, name: str) -> None:
        name = name.rsplit(" ", 1)[-1]
        if name in INLINE_CODES and self._code_depth:
            self._code_depth -= 1
        elif name == "seg" and self._segment is not None:
            self._unit[1].setdefault(self._language, " ".join("".join(self._segment).split()))
            self._segment = None
        elif name == "tuv":
            self._language = None
        elif name == "tu" and self._unit is not None:
            line, segments = self._unit
            self.units.append((line, segments.get(self.pair.source), segments.get(self.pair.target)))
            self._unit = None

    def read(self, path: Path, block: int = 1 << 20) -> None:
        """The whole file, a block at a time; a ``CorpusError`` where it is not well-formed."""
        with path.open("rb") as file:
            try:
                while chunk := file.read(block):
                    self.parser.Parse(chunk, False)
                self.parser.Parse(b"", True)
            except expat.ExpatError as error:
                raise CorpusError(f"{path}: not a well-formed TMX file at line {error.lineno}, column "
                                  f"{error.offset + 1}: {expat.ErrorString(error.code)}") from None
