"""Sentence pairs from a corpus as people have it (a manythings download, TSV, CSV, TMX, aligned files, a hub
dataset: docs/configuration.md's table), read as what it is, in the run's direction, all through the same cleaning
(stripped, NFC); a bad line counted per kind with its line number, never a byte replaced. Pairs stream out one at a
time (``stream_pairs``): a corpus of millions is never held as Python objects."""

from __future__ import annotations

import codecs
import csv
import itertools
import logging
import unicodedata
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from data.corpus import CorpusError, CorpusNotFoundError, aligned_files
from data.corpus_text import check_tatoeba_language, file_lines
from data.languages import NAMES, THREE_LETTER, LanguagePair, download_language
from data.tmx import TmxReader, is_tmx

log = logging.getLogger(__name__)
Pairs = list[tuple[str, str]]
PairStream = tuple[Iterator[tuple[str, str]], "ParseReport"]  # the pairs, and the report they fill as they come
FORMATS = ("auto", "tatoeba", "tsv", "csv", "tmx", "aligned", "hub")
BAD_LINES = {  # kind -> what it is, as the warning says it
    "too_few_fields": "fewer fields than columns",
    "too_many_fields": "more fields than columns (a tab or comma inside a field?)",
    "empty_side": "an empty source or target",
    "missing_language": "a translation unit without both languages",
}
FIRST_LINES_KEPT = 5  # line numbers kept per kind, for the warning


@dataclass
class ParseReport:
    """How a corpus was read and what reading it kept and skipped, so that nothing is dropped silently."""

    format: str = ""  # data.corpus_format's answer: tatoeba, tsv, csv, tmx, aligned or hub
    reading: str = ""  # the format, the columns and the direction: "mine.csv as csv: column 'es' → column 'en'"
    kept: int = 0
    bad: dict[str, int] = field(default_factory=dict)  # kind (BAD_LINES) -> lines skipped
    first_lines: dict[str, list[int]] = field(default_factory=dict)  # kind -> its first line numbers (from 1)
    renormalized: int = 0  # pairs that were not in Unicode NFC

    @property
    def skipped(self) -> int:
        return sum(self.bad.values())

    def count(self, kind: str, line_number: int, strict: bool, where: str) -> None:
        """One bad line of ``kind``; with ``strict``, a ``CorpusError`` at the first."""
        if strict:
            raise CorpusError(f"{where}, line {line_number}: {BAD_LINES[kind]} (data.strict=true stops at the first "
                              f"bad line)")
        self.bad[kind] = self.bad.get(kind, 0) + 1
        if len(lines := self.first_lines.setdefault(kind, [])) < FIRST_LINES_KEPT:
            lines.append(line_number)

    def summary(self) -> str:
        text = f"{self.kept} pairs kept, {self.skipped} lines skipped, {self.renormalized} re-normalized to NFC"
        for kind, count in self.bad.items():
            shown = ", ".join(map(str, self.first_lines.get(kind, []))) + ", …" * (count > FIRST_LINES_KEPT)
            text += f"; {count} with {BAD_LINES[kind]} (line{'s' if count > 1 else ''} {shown})"
        return text


def detect_format(path: Path, lines: list[str]) -> str:
    """``auto``'s answer for a file: its extension (any case), else its content: a Tatoeba line carries a CC-BY
    attribution in a third column, a manythings name (``spa.txt``) is Tatoeba's, a header or tabs make a table."""
    suffix = path.suffix.lower()
    if suffix == ".zip" or zipfile.is_zipfile(path):
        return "tatoeba"
    if suffix in (".tsv", ".csv"):
        return suffix[1:]
    lines = [line.rstrip("\n").removesuffix("\r") for line in lines[:200]]
    if any(len(f := line.split("\t")) == 3 and f[2].lstrip().startswith("CC-BY") for line in lines):
        return "tatoeba"
    named = download_language(path.name) is not None  # spa.txt, nld.txt: a download's own file
    return "tatoeba" if named and not header_names(lines[0].split("\t") if lines else []) else "tsv"


LANGUAGE_WORDS = {**{code: code for code in NAMES}, **{three: two for two, three in THREE_LETTER.items()},
                  **{name.lower(): code for code, name in NAMES.items()}}  # "nl", "nld", "dutch" -> "nl"
OTHER_COLUMN_WORDS = {"id", "attribution", "license", "note", "notes", "source", "target", "score", "domain"}


def header_names(fields: Sequence[str]) -> list[str] | None:
    """The column names of a header line (``es<TAB>en``, ``id,English,Spanish``: languages by code or name, and
    a few usual other columns), else None: a line of text is never taken for a header."""
    words = [f.strip().lower() for f in fields]
    names = [LANGUAGE_WORDS.get(w, w) for w in words]
    languages = [w for w in words if w in LANGUAGE_WORDS]
    if len(languages) < 2 or len(set(names)) < len(names) or not set(words) <= set(LANGUAGE_WORDS) | OTHER_COLUMN_WORDS:
        return None
    return names


def rows(lines: Iterable[str], fmt: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each line of a table (``lines`` keep their ends: only ``\n`` ends one, as in
    ``data/lines.py``); a CSV's quoted fields may hold commas and line breaks."""
    if fmt != "csv":
        return ((number, line.rstrip("\n").removesuffix("\r").split("\t")) for number, line in enumerate(lines, 1))
    reader = csv.reader(lines)
    return ((reader.line_num, fields) for fields in reader)


@dataclass(frozen=True)
class Layout:
    """Which fields of a row are the source and the target, and how many fields a good row has."""

    names: tuple[str, ...]  # the columns, in file order
    source: int
    target: int
    sizes: tuple[int, ...]
    header: bool = False  # the first row names the columns (skipped)

    def describe(self, where: str, fmt: str) -> str:
        def column(i: int) -> str:
            return f"column {i + 1}" + (f" '{self.names[i]}'" if self.names[i] else "")
        note = ", header skipped" if self.header else "" if any(self.names) else " (no header: source then target)"
        return f"{where} as {fmt}: {column(self.source)} → {column(self.target)}{note}"


def choose_layout(first: list[str], fmt: str, pair: LanguagePair, columns: Sequence[str] | None,
                  where: str) -> Layout:
    """The columns of a table: Tatoeba's own, ``data.columns``, the header, or two columns in the run's order."""
    if fmt == "tatoeba":
        english = pair.source == "en"
        names = ("en", pair.other_than_english() or "", "attribution")
        return Layout(names, 0 if english else 1, 1 if english else 0, (2, 3))
    header = header_names(first)
    names = [str(c).strip().lower() for c in columns] if columns else header
    if names is None:
        if len(first) > 2:
            found = ", ".join(repr(f[:30]) for f in first)
            raise CorpusError(f"{where} has {len(first)} columns ({found}): name them with a header line of language "
                              f"codes or data.columns=[...] (e.g. [en,{pair.target},note]), or set "
                              f"data.corpus_format=tatoeba for a manythings download")
        return Layout(("", ""), 0, 1, (2,))
    missing = [code for code in (pair.source, pair.target) if code not in names]
    if missing:
        said = "data.columns" if columns else "its header"
        raise CorpusError(f"{where}: {said} names the columns {', '.join(names)}, none of them {', '.join(missing)} "
                          f"({pair.describe()}): set data.source_lang / data.target_lang, or data.columns")
    return Layout(tuple(names), names.index(pair.source), names.index(pair.target), (len(names),),
                  header=header is not None)


def table_pairs(lines: Iterable[str], fmt: str, pair: LanguagePair, where: str, columns: Sequence[str] | None = None,
                strict: bool = False) -> PairStream:
    """The pairs of a Tatoeba download, a TSV or a CSV (its ``lines``), in the run's direction."""
    table = rows(lines, fmt)
    first = next(table, None)
    layout = choose_layout(first[1] if first else [], fmt, pair, columns, where)

    def entry(fields: list[str]) -> tuple[str, str] | str:
        if len(fields) in layout.sizes:
            return fields[layout.source], fields[layout.target]
        return "too_few_fields" if len(fields) < min(layout.sizes) else "too_many_fields"
    table = itertools.chain([first] if first and not layout.header else [], table)
    entries = ((number, entry(fields)) for number, fields in table
               if any(f.strip() for f in fields))  # a blank line holds no pair: nothing is lost
    report = ParseReport(fmt, layout.describe(where, fmt))
    return cleaned(entries, report, strict, where), report


def cleaned(entries: Iterable[tuple[int, tuple[str | None, str | None] | str]], report: ParseReport,
            strict: bool = False, where: str = "") -> Iterator[tuple[str, str]]:
    """The NFC, stripped pairs of ``entries`` (line number, the pair or the kind of bad line it is); each bad line,
    and each pair with an empty side, counted in ``report``, and so is each pair kept."""
    for number, sides in entries:
        if isinstance(sides, str):
            report.count(sides, number, strict, where)
            continue
        stripped = tuple((text or "").strip() for text in sides)
        clean = stripped if all(map(str.isascii, stripped)) else tuple(  # (ASCII is NFC already)
            unicodedata.normalize("NFC", text).strip() for text in stripped)
        report.renormalized += clean != stripped
        if all(clean):
            report.kept += 1
            yield clean
        else:
            report.count("empty_side", number, strict, where)


def aligned_pairs(prefix: Path, pair: LanguagePair, encoding: str | None = None) -> PairStream:
    """Line i of one file with line i of the other; files of different lengths are refused."""
    source_file, target_file = aligned_files(prefix, pair)

    def lines() -> Iterator[tuple[int, tuple[str, str]]]:
        sides = (file_lines(f, pair, encoding) for f in (source_file, target_file))
        for number, (source, target) in enumerate(itertools.zip_longest(*sides), 1):
            if source is None or target is None:
                longer = target_file if source is None else source_file
                counts = [sum(1 for _ in file_lines(f, pair, encoding)) if f == longer else number - 1
                          for f in (source_file, target_file)]
                raise CorpusError(f"{source_file.name} has {counts[0]} lines and {target_file.name} {counts[1]}: "
                                  f"not aligned (line {number} of {longer.name} has no partner)")
            yield number, (source.rstrip("\n").removesuffix("\r"), target.rstrip("\n").removesuffix("\r"))
    report = ParseReport("aligned", f"{source_file} → {target_file.name} as aligned files")
    return cleaned(lines(), report), report


def tmx_pairs(path: Path, pair: LanguagePair, strict: bool = False) -> PairStream:
    """The translation units of a TMX file holding both of the pair's languages (``data/tmx.py``), each counted
    at the line where it starts; a file without them is refused, naming the languages it holds."""
    reader = TmxReader(pair)
    reader.read(path)
    if not {pair.source, pair.target} <= reader.languages:
        raise CorpusError(f"{path}: its translation units hold {', '.join(sorted(reader.languages)) or 'no language'},"
                          f" not both {pair.source} and {pair.target}: set data.source_lang / data.target_lang")
    report = ParseReport("tmx", f"{path.name} as tmx: xml:lang {pair.source} → {pair.target}, "
                                f"{reader.tags_dropped} inline tags dropped")
    entries = ((line, "missing_language" if source is None or target is None else (source, target))
               for line, source, target in reader.units)
    return cleaned(entries, report, strict, path.name), report


def hub_pairs(path: str, name: str | None, split: str, pair: LanguagePair) -> PairStream:
    """The ``translation`` column of a Hugging Face dataset (``load_dataset(path, name, split=split)``), in the
    pair's direction."""
    from datasets import load_dataset

    def sides(row: dict) -> tuple[str, str]:
        translation = row.get("translation") or {}
        if pair.source not in translation or pair.target not in translation:
            raise CorpusError(f"{path}: rows translate {'/'.join(sorted(translation)) or 'nothing'}, not "
                              f"{pair.source}/{pair.target}: set data.source_lang / data.target_lang to its languages")
        return translation[pair.source], translation[pair.target]
    report = ParseReport("hub", f"{path} ({split}) as hub: translation['{pair.source}'] → translation['{pair.target}']")
    return checked(cleaned(enumerate(map(sides, load_dataset(path, name, split=split)), 1), report), report, path,
                   pair), report


def read_pairs(path: Path, pair: LanguagePair, corpus_format: str = "auto", columns: Sequence[str] | None = None,
               encoding: str | None = None, strict: bool = False) -> tuple[Pairs, ParseReport]:
    """``stream_pairs``' pairs in a list: for a corpus that fits in memory as Python objects."""
    stream, report = stream_pairs(path, pair, corpus_format, columns, encoding, strict)
    return list(stream), report


def stream_pairs(path: Path, pair: LanguagePair, corpus_format: str = "auto", columns: Sequence[str] | None = None,
                 encoding: str | None = None, strict: bool = False) -> PairStream:
    """The corpus at ``path`` (a file, or an aligned files' prefix) as ``(source, target)`` pairs, one at a time,
    and how it was read; once the pairs are all read, bad lines are said in one warning, and a file with more
    malformed lines than pairs is refused (``CorpusError``): it is not a sentence-pair corpus, or not in the
    format it was read as."""
    aligned = not path.is_file() and all(f.is_file() for f in aligned_files(path, pair))
    if corpus_format == "aligned" or aligned:
        if not aligned:
            source, target = aligned_files(path, pair)
            raise CorpusNotFoundError(f"data.corpus_format=aligned: {source} and {target} do not both exist")
        pairs, report = aligned_pairs(path, pair, encoding)
    elif not path.is_file():
        raise CorpusNotFoundError(f"corpus file {path} does not exist")
    elif corpus_format == "tmx" or corpus_format == "auto" and (path.suffix.lower() == ".tmx" or is_tmx(path)):
        pairs, report = tmx_pairs(path, pair, strict)
    else:
        fmt = corpus_format
        if fmt == "auto":
            fmt = detect_format(path, list(itertools.islice(file_lines(path, pair, encoding), 200)))
        if fmt == "tatoeba" and path.suffix.lower() != ".zip":
            check_tatoeba_language(path, path.name, pair)
        pairs, report = table_pairs(file_lines(path, pair, encoding), fmt, pair, path.name, columns, strict)
    return checked(pairs, report, path, pair), report


def checked(pairs: Iterator[tuple[str, str]], report: ParseReport, path: Path | str,
            pair: LanguagePair) -> Iterator[tuple[str, str]]:
    """``pairs``, then, once read, the report's verdict: refused if mostly malformed, else its bad lines warned."""
    yield from pairs
    malformed = report.bad.get("too_few_fields", 0) + report.bad.get("too_many_fields", 0)
    if malformed > report.kept:
        raise CorpusError(f"{path}: {malformed} malformed lines against {report.kept} pairs of "
                          f"{pair.describe('–')} read as {report.format}: not a sentence-pair corpus in that "
                          f"format")
    if report.skipped:
        log.warning("%s: %s", getattr(path, "name", path), report.summary())


def reading_problems(settings: Mapping, prefix: str = "") -> list[str]:
    """What is refused among the settings that say how to read the corpus (``read_pairs``' own), one phrase each."""
    problems, fmt = [], settings.get("corpus_format", "auto")
    if fmt not in FORMATS:
        problems.append(f"{prefix}corpus_format={fmt!r} must be one of {', '.join(FORMATS)}")
    if (fmt == "hub") != bool(settings.get("hub_path")) and not (fmt == "auto" and settings.get("hub_path")):
        problems.append(f"{prefix}corpus_format=hub goes with {prefix}hub_path (and only it)")
    columns = settings.get("columns")
    if columns is not None and (isinstance(columns, str) or len(columns) < 2):
        problems.append(f"{prefix}columns={columns!r} must list the file's columns in order, e.g. [id,en,es]")
    if (encoding := settings.get("encoding")) is not None:
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError):
            problems.append(f"{prefix}encoding={encoding!r} is not an encoding Python knows (cp1252, latin-1, ...)")
    return problems
