"""A translation memory (TMX, what CAT tools and OPUS export) read as sentence pairs, streaming.

    <tu><tuv xml:lang="en-US"><seg>Press <bpt i="1">&lt;b&gt;</bpt>Save<ept i="1">&lt;/b&gt;</ept>.</seg></tuv>
        <tuv xml:lang="es-ES"><seg>Pulse <hi>Guardar</hi>.</seg></tuv></tu>      →  ("Press Save.", "Pulse Guardar.")

Each translation unit gives the pair of its segments in the run's two languages, matched by the primary subtag of
their ``xml:lang`` (``en-US``, ``EN_gb`` → en; TMX 1.1's ``lang`` too). Inline codes (``<bpt>``, ``<ept>``,
``<ph>``, ``<it>``, ``<ut>``) hold the document's own markup: dropped with their content, and counted; ``<hi>``
and ``<sub>`` hold text: kept. The file is parsed by expat as it is read (a memory can be gigabytes), in the
encoding its byte-order mark or declaration says (UTF-8, UTF-16); external entities are never fetched. A unit
without both languages is counted with its line number; a file that is not well-formed is refused where it stops
being so; a file without the pair is refused with the languages it holds.
"""

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
    for encoding in ("utf-16", "utf-8") if head[:2] in (b"\xff\xfe", b"\xfe\xff") else ("utf-8",):
        if "<tmx" in head.decode(encoding, "ignore"):
            return True
    return False


def primary_language(tag: str) -> str:
    """``en-US``, ``EN_gb``, ``en`` → ``en``."""
    return re.split(r"[-_]", tag.strip(), maxsplit=1)[0].lower()


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
            self._language = primary_language(tag)
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
