"""Find the Tatoeba English–Spanish corpus (local file, env var, shared copy, or download) and parse it.

Corpus: sentence pairs from tatoeba.org as packaged by manythings.org (CC-BY 2.0 FR),
``spa-eng/spa.txt``: ``English<TAB>Spanish[<TAB>attribution]`` one pair per line.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import unicodedata
import urllib.request
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from data.atomic_file import atomic_file

log = logging.getLogger(__name__)

DOWNLOAD_URL = "http://storage.googleapis.com/download.tensorflow.org/data/spa-eng.zip"
ENV_VAR = "SPA_ENG_DATA"  # a folder holding spa-eng.zip (or spa.txt), or the file itself
PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_COPY = PROJECT_ROOT.parent / "shared" / "data" / "spa-eng.zip"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attention-from-scratch"
FILE_NAMES = ("spa-eng.zip", "spa.txt")


class CorpusNotFoundError(FileNotFoundError):
    """No corpus file anywhere we looked, and it could not be downloaded."""


class CorpusError(ValueError):
    """A corpus file that is not usable: not a zip or UTF-8 text, or mostly not sentence pairs."""


@dataclass
class ParseReport:
    """What parsing kept and skipped, so that nothing is dropped silently."""

    kept: int = 0
    skipped_malformed: int = 0  # not 2 or 3 tab-separated columns
    skipped_empty: int = 0  # an empty English or Spanish side
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


def _candidates(folder: Path) -> list[Path]:
    return [folder / name for name in FILE_NAMES] + [folder / "spa-eng" / "spa.txt"]


def locate_corpus(path: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None,
                  download: bool = True, sha256: str | None = None) -> Path:
    """Return the corpus file, looking in order at:

    1. ``path`` (a .zip or .txt file, or a folder holding one);
    2. the folder or file named by the ``SPA_ENG_DATA`` environment variable;
    3. ``../shared/data/spa-eng.zip`` beside the project;
    4. the cache folder (a previous download), else download it there (progress bar,
       zip check, and ``sha256`` check when given).
    """
    if path is not None:
        given = Path(path).expanduser()
        if given.is_file():
            return given
        found = [p for p in _candidates(given) if p.is_file()] if given.is_dir() else []
        if found:
            return found[0]
        raise CorpusNotFoundError(f"corpus path {given} does not exist (expected spa-eng.zip or spa.txt)")
    if os.environ.get(ENV_VAR):
        env_path = Path(os.environ[ENV_VAR]).expanduser()
        found = [env_path] if env_path.is_file() else [p for p in _candidates(env_path) if p.is_file()]
        if found:
            return found[0]
        raise CorpusNotFoundError(f"${ENV_VAR}={env_path} holds no spa-eng.zip or spa.txt")
    if SHARED_COPY.is_file():
        return SHARED_COPY
    cache = Path(cache_dir or DEFAULT_CACHE).expanduser()
    cached = cache / "spa-eng.zip"
    if cached.is_file():
        return cached
    if not download:
        raise CorpusNotFoundError(_where_to_put_it(cached))
    from filelock import FileLock

    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cached) + ".lock"):  # two first runs at once: one downloads, the other waits
        return cached if cached.is_file() else _download(cached, sha256)


def _where_to_put_it(cached: Path) -> str:
    return (
        f"Tatoeba corpus not found and not downloadable. Put spa-eng.zip (from {DOWNLOAD_URL}) at {cached}, "
        f"or set {ENV_VAR}=/folder/with/spa-eng.zip, or pass data.corpus_path=/path/to/spa-eng.zip"
    )


def _download(target: Path, sha256: str | None) -> Path:
    from tqdm.auto import tqdm

    target.parent.mkdir(parents=True, exist_ok=True)
    hasher = hashlib.sha256()
    try:  # written whole or not at all: checked before it takes the corpus's name
        with atomic_file(target, "wb") as out:
            with urllib.request.urlopen(DOWNLOAD_URL, timeout=30) as response:
                total = int(response.headers.get("Content-Length", 0)) or None
                with tqdm(total=total, unit="B", unit_scale=True, desc="spa-eng.zip") as bar:
                    while chunk := response.read(1 << 16):
                        out.write(chunk)
                        hasher.update(chunk)
                        bar.update(len(chunk))
            digest = hasher.hexdigest()
            if sha256 and digest != sha256:
                raise CorpusNotFoundError(f"downloaded spa-eng.zip has sha256 {digest}, expected {sha256}")
            out.flush()
            try:
                with zipfile.ZipFile(out.name) as archive:  # raises BadZipFile on a truncated download
                    damaged = archive.testzip() is not None or not any(n.endswith("spa.txt") for n in archive.namelist())
            except zipfile.BadZipFile:
                damaged = True
            if damaged:
                raise CorpusNotFoundError("downloaded spa-eng.zip is damaged or holds no spa.txt")
    except OSError as error:
        raise CorpusNotFoundError(f"{_where_to_put_it(target)} (download failed: {error})") from error
    log.info("downloaded %s (sha256 %s)", target, digest)
    return target


def corpus_lines(path: str | os.PathLike) -> list[str]:
    """Text lines of ``spa.txt``, from the zip or the plain file: a byte-order mark is dropped, bad
    UTF-8 bytes become U+FFFD. A damaged zip or a file that is not text is a ``CorpusError``."""
    path = Path(path)
    if not path.is_file():
        raise CorpusNotFoundError(f"corpus file {path} does not exist")
    if path.suffix == ".zip" or zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                members = [n for n in archive.namelist() if n.endswith("spa.txt")]
                if not members:
                    raise CorpusNotFoundError(f"{path} holds no spa.txt")
                raw = archive.read(members[0])
        except (zipfile.BadZipFile, EOFError, OSError) as error:  # truncated or damaged
            raise CorpusError(f"{path}: not a readable zip archive ({error})") from None
    else:
        raw = path.read_bytes()
    if b"\x00" in raw:  # UTF-8 text never holds a NUL byte; binary files do
        raise CorpusError(f"{path}: not a text file (it holds NUL bytes); expected spa-eng.zip or UTF-8 spa.txt")
    return io.StringIO(raw.decode("utf-8-sig", errors="replace")).read().splitlines()


def parse_lines(lines: list[str]) -> tuple[list[tuple[str, str]], ParseReport]:
    """Parse ``English<TAB>Spanish[<TAB>attribution]`` lines into NFC, stripped pairs."""
    report, pairs = ParseReport(), []
    for line in lines:
        columns = line.rstrip("\r\n").split("\t")
        if len(columns) in (2, 3):
            report.three_columns += len(columns) == 3
            _keep_clean(columns[0], columns[1], line, pairs, report)
        else:
            if line.strip():
                report.skipped_malformed += 1
            else:  # a blank line is an empty pair
                report.skipped_empty += 1
            if len(report.examples) < 3:
                report.examples.append(line)
    report.kept = len(pairs)
    return pairs, report


def clean_pairs(raw: Iterable[tuple[str, str]]) -> tuple[list[tuple[str, str]], ParseReport]:
    """NFC + strip already-split pairs (e.g. from a Hugging Face dataset); empty ones are skipped."""
    report, pairs = ParseReport(), []
    for english, spanish in raw:
        _keep_clean(english or "", spanish or "", f"{english}\t{spanish}", pairs, report)
    report.kept = len(pairs)
    return pairs, report


def _keep_clean(english: str, spanish: str, line: str, pairs: list, report: ParseReport) -> None:
    clean = tuple(unicodedata.normalize("NFC", text).strip() for text in (english, spanish))
    if clean != (english.strip(), spanish.strip()):
        report.renormalized += 1
    if all(clean):
        pairs.append(clean)
        return
    report.skipped_empty += 1
    if len(report.examples) < 3:
        report.examples.append(line)


def load_pairs(path: str | os.PathLike) -> tuple[list[tuple[str, str]], ParseReport]:
    """Read and parse a corpus file; the report is logged once, as a warning if lines were skipped.

    A file with more malformed lines than pairs is refused (``CorpusError``): it is not this corpus.
    """
    pairs, report = parse_lines(corpus_lines(path))
    if report.skipped_malformed > report.kept:
        raise CorpusError(f"{path}: {report.skipped_malformed} malformed lines against {report.kept} "
                          f"English<TAB>Spanish pairs: not a sentence-pair corpus")
    (log.warning if report.skipped else log.info)("%s: %s", path, report.summary())
    return pairs, report
