"""Sentence pairs from a corpus as people have it, in the run's direction, all through the same cleaning.

Formats (``read_pairs`` tells them apart by name):

- a manythings.org / Tatoeba download (``nld-eng.zip``, ``spa-eng.zip``, or the ``.txt`` inside it):
  ``English<TAB>Other[<TAB>attribution]``, English first whichever direction is trained;
- a two-column ``.tsv``: source then target, or in the order a header line of language codes names
  (``nl<TAB>en``);
- two aligned plain-text files, one sentence a line (``corpus.en`` + ``corpus.nl``), given as the
  prefix ``corpus``, Moses style;
- a Hugging Face dataset with a ``translation`` column (``hub_pairs``).

Every pair is stripped and put in Unicode NFC; empty and malformed lines are counted and skipped,
never dropped silently.
"""

from __future__ import annotations

import io
import logging
import unicodedata
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from data.corpus import CorpusError, CorpusNotFoundError, aligned_files
from data.languages import LanguagePair, download_language, language_name

log = logging.getLogger(__name__)
Pairs = list[tuple[str, str]]


@dataclass
class ParseReport:
    """What parsing kept and skipped, so that nothing is dropped silently."""

    kept: int = 0
    skipped_malformed: int = 0  # not 2 or 3 tab-separated columns
    skipped_empty: int = 0  # an empty source or target side
    three_columns: int = 0  # newer releases add an attribution column (kept, column dropped)
    renormalized: int = 0  # lines that were not in Unicode NFC
    examples: list[str] = field(default_factory=list)  # first few skipped lines, for the report

    @property
    def skipped(self) -> int:
        return self.skipped_malformed + self.skipped_empty

    def summary(self) -> str:
        text = (
            f"{self.kept} pairs kept; skipped {self.skipped} lines "
            f"({self.skipped_malformed} malformed, {self.skipped_empty} empty); "
            f"{self.three_columns} had an attribution column; {self.renormalized} re-normalized to NFC"
        )
        if self.examples:
            text += "; first skipped: " + " | ".join(repr(e[:60]) for e in self.examples)
        return text

    def skip(self, line: str, malformed: bool) -> None:
        if malformed:
            self.skipped_malformed += 1
        else:
            self.skipped_empty += 1
        if len(self.examples) < 3:
            self.examples.append(line)


def text_lines(raw: bytes, path: Path) -> list[str]:
    """Lines of UTF-8 text: a byte-order mark is dropped, bad bytes become U+FFFD; a binary file is refused."""
    if b"\x00" in raw:  # UTF-8 text never holds a NUL byte; binary files do
        raise CorpusError(f"{path}: not a text file (it holds NUL bytes); expected a zip or UTF-8 text")
    return io.StringIO(raw.decode("utf-8-sig", errors="replace")).read().splitlines()


def _check_tatoeba_language(path: Path, member: str, pair: LanguagePair) -> None:
    other = pair.other_than_english()
    if other is None:
        raise CorpusError(f"{path}: a Tatoeba download pairs English with one language, and {pair.describe()} has "
                          f"no English side; give a .tsv or aligned files for it")
    said = download_language(member)
    if said is not None and said != other:
        raise CorpusError(f"{path}: holds English–{language_name(said)} ({member}), not {pair.describe()}: "
                          f"set data.source_lang / data.target_lang to its languages")


def tatoeba_text(path: Path, pair: LanguagePair) -> list[str]:
    """The lines of a manythings download: the one sentence-pair ``.txt`` of the zip (not ``_about.txt``,
    not ``__MACOSX/``), or the plain file; its language checked against the pair's."""
    if path.suffix != ".zip" and not zipfile.is_zipfile(path):
        _check_tatoeba_language(path, path.name, pair)
        return text_lines(path.read_bytes(), path)
    try:
        with zipfile.ZipFile(path) as archive:
            members = [n for n in archive.namelist() if n.endswith(".txt") and "__MACOSX/" not in n
                       and not PurePosixPath(n).name.startswith(("_", "."))]
            wanted = [n for n in members if PurePosixPath(n).name in pair.tatoeba_names()]
            if not members:
                raise CorpusError(f"{path} holds no sentence-pair .txt file (a manythings download holds one, "
                                  f"such as spa.txt or nld.txt)")
            member = (wanted or members)[0]
            _check_tatoeba_language(path, member, pair)
            raw = archive.read(member)
    except (zipfile.BadZipFile, EOFError, OSError) as error:  # truncated or damaged
        raise CorpusError(f"{path}: not a readable zip archive ({error})") from None
    return text_lines(raw, path)


def parse_lines(lines: Iterable[str], order: tuple[int, int] = (0, 1)) -> tuple[Pairs, ParseReport]:
    """Tab-separated lines of 2 or 3 columns into clean pairs: column ``order[0]`` the source, ``order[1]``
    the target (a third column, the attribution, is dropped)."""
    report, pairs = ParseReport(), []
    for line in lines:
        columns = line.rstrip("\r\n").split("\t")
        if len(columns) in (2, 3):
            report.three_columns += len(columns) == 3
            keep_clean(columns[order[0]], columns[order[1]], line, pairs, report)
        else:
            report.skip(line, malformed=bool(line.strip()))  # a blank line is an empty pair
    report.kept = len(pairs)
    return pairs, report


def keep_clean(source: str, target: str, line: str, pairs: Pairs, report: ParseReport) -> None:
    """Appends the NFC, stripped pair to ``pairs``, or counts it as empty in ``report``."""
    clean = tuple(unicodedata.normalize("NFC", text).strip() for text in (source, target))
    if clean != (source.strip(), target.strip()):
        report.renormalized += 1
    if all(clean):
        pairs.append(clean)
    else:
        report.skip(line, malformed=False)


def clean_pairs(raw: Iterable[tuple[str, str]]) -> tuple[Pairs, ParseReport]:
    """NFC + strip already-split pairs (a hub dataset's); empty ones are skipped."""
    report, pairs = ParseReport(), []
    for source, target in raw:
        keep_clean(source or "", target or "", f"{source}\t{target}", pairs, report)
    report.kept = len(pairs)
    return pairs, report


def tsv_pairs(path: Path, pair: LanguagePair) -> tuple[Pairs, ParseReport]:
    """A two-column TSV: source then target, unless a header of the pair's codes names the order."""
    lines = text_lines(path.read_bytes(), path)
    header = [column.strip().lower() for column in lines[0].split("\t")] if lines else []
    if sorted(header) == sorted((pair.source, pair.target)):
        return parse_lines(lines[1:], (header.index(pair.source), header.index(pair.target)))
    return parse_lines(lines)


def aligned_pairs(prefix: Path, pair: LanguagePair) -> tuple[Pairs, ParseReport]:
    """Line i of one file with line i of the other; files of different lengths are refused."""
    source_file, target_file = aligned_files(prefix, pair)
    sources, targets = (text_lines(f.read_bytes(), f) for f in (source_file, target_file))
    if len(sources) != len(targets):
        longer = source_file if len(sources) > len(targets) else target_file
        raise CorpusError(f"{source_file.name} has {len(sources)} lines and {target_file.name} {len(targets)}: "
                          f"not aligned (line {min(len(sources), len(targets)) + 1} of {longer.name} has no partner)")
    report, pairs = ParseReport(), []
    for source, target in zip(sources, targets):
        keep_clean(source, target, f"{source}\t{target}", pairs, report)
    report.kept = len(pairs)
    return pairs, report


def hub_pairs(path: str, name: str | None, split: str, pair: LanguagePair) -> tuple[Pairs, ParseReport]:
    """The ``translation`` column of a Hugging Face dataset (``load_dataset(path, name, split=split)``), in the
    pair's direction."""
    from datasets import load_dataset

    def sides(row: dict) -> tuple[str, str]:
        translation = row.get("translation") or {}
        if pair.source not in translation or pair.target not in translation:
            raise CorpusError(f"{path}: rows translate {'/'.join(sorted(translation)) or 'nothing'}, not "
                              f"{pair.source}/{pair.target}: set data.source_lang / data.target_lang to its languages")
        return translation[pair.source], translation[pair.target]
    pairs, report = clean_pairs(map(sides, load_dataset(path, name, split=split)))
    (log.warning if report.skipped else log.info)("%s, %s: %s", path, pair.describe(), report.summary())
    return pairs, report


def read_pairs(path: Path, pair: LanguagePair) -> tuple[Pairs, ParseReport]:
    """The corpus at ``path`` (a file, or an aligned files' prefix) as ``(source, target)`` pairs; the report
    is logged once, as a warning if lines were skipped. A file with more malformed lines than pairs is
    refused (``CorpusError``): it is not a sentence-pair corpus."""
    if not path.is_file() and all(f.is_file() for f in aligned_files(path, pair)):
        pairs, report = aligned_pairs(path, pair)
    elif not path.is_file():
        raise CorpusNotFoundError(f"corpus file {path} does not exist")
    elif path.suffix == ".tsv":
        pairs, report = tsv_pairs(path, pair)
    else:  # a Tatoeba download: English first
        pairs, report = parse_lines(tatoeba_text(path, pair), (0, 1) if pair.source == "en" else (1, 0))
    if report.skipped_malformed > report.kept:
        raise CorpusError(f"{path}: {report.skipped_malformed} malformed lines against {report.kept} pairs of "
                          f"{pair.describe('–')}: not a sentence-pair corpus")
    (log.warning if report.skipped else log.info)("%s, %s: %s", path, pair.describe(), report.summary())
    return pairs, report
