"""A corpus file's lines: a manythings zip's one sentence-pair file or the file itself, read a line at a time and
decoded without replacing a byte (UTF-8, or the encoding ``data.encoding`` names); a binary file, or a byte that is
not of the encoding, is a ``CorpusError`` naming where it is. A file larger than a few MB shows its progress."""

from __future__ import annotations

import codecs
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO

from data.corpus import CorpusError
from data.languages import LanguagePair, download_language, language_name

BLOCK = 1 << 20  # bytes read and decoded at a time


def check_tatoeba_language(path: Path, member: str, pair: LanguagePair) -> None:
    other = pair.other_than_english()
    if other is None:
        raise CorpusError(f"{path}: a Tatoeba download pairs English with one language, and {pair.describe()} has "
                          f"no English side; give a .tsv or aligned files for it")
    said = download_language(member)
    if said is not None and said != other:
        raise CorpusError(f"{path}: holds English–{language_name(said)} ({member}), not {pair.describe()}: "
                          f"set data.source_lang / data.target_lang to its languages")


@contextmanager
def opened(path: Path, pair: LanguagePair) -> Iterator[tuple[IO[bytes], str, int]]:
    """The corpus file's bytes, where they are (for messages) and their size: the file, or of a zip its one
    sentence-pair ``.txt`` (a manythings download: not ``_about.txt``, not ``__MACOSX/``), its language checked
    against the pair's. A damaged zip, even found midway, is one ``CorpusError``."""
    if path.suffix.lower() != ".zip" and not zipfile.is_zipfile(path):
        with path.open("rb") as raw:
            yield raw, str(path), path.stat().st_size
        return
    try:
        with zipfile.ZipFile(path) as archive:
            members = [n for n in archive.namelist() if n.endswith(".txt") and "__MACOSX/" not in n
                       and not PurePosixPath(n).name.startswith(("_", "."))]
            wanted = [n for n in members if PurePosixPath(n).name in pair.tatoeba_names()]
            if not members:
                raise CorpusError(f"{path} holds no sentence-pair .txt file (a manythings download holds one, "
                                  f"such as spa.txt or nld.txt)")
            member = (wanted or members)[0]
            check_tatoeba_language(path, member, pair)
            with archive.open(member) as raw:
                yield raw, f"{path}:{member}", archive.getinfo(member).file_size
    except (zipfile.BadZipFile, EOFError, OSError) as error:  # truncated or damaged
        raise CorpusError(f"{path}: not a readable zip archive ({error})") from None


def text_size(path: Path) -> int:
    """The bytes of text a corpus file holds: a zip's, uncompressed."""
    if path.suffix.lower() == ".zip" or zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                return sum(member.file_size for member in archive.infolist())
        except (zipfile.BadZipFile, OSError):
            pass  # (said when it is read)
    return path.stat().st_size


def file_lines(path: Path, pair: LanguagePair, encoding: str | None = None) -> Iterator[str]:
    """The lines of a corpus file, each with its line end: only ``\n`` ends one (U+2028 and form feeds stay inside
    a sentence), a byte-order mark dropped."""
    from tqdm.auto import tqdm

    with opened(path, pair) as (raw, where, size), \
            tqdm(total=size, unit="B", unit_scale=True, desc=f"reading {path.name}", delay=5, leave=False) as bar:
        if encoding and codecs.lookup(encoding).name.startswith(("utf-16", "utf-32")):  # no byte of its own ends a line
            yield from _lines(decoded(raw.read(), where, encoding), first=True)  # (small files, these)
            return
        offset, number, rest = 0, 1, b""
        for block in iter(lambda: raw.read(BLOCK), b""):  # whole lines a block at a time: no Python step per line
            block = rest + block
            end = block.rfind(b"\n") + 1  # (the rest, a line begun, waits for the next block)
            block, rest = block[:end], block[end:]
            yield from _lines(decoded(block, where, encoding, offset, number), offset == 0)
            offset, number = offset + len(block), number + block.count(b"\n")
            bar.update(len(block))
        yield from _lines(decoded(rest, where, encoding, offset, number), offset == 0)  # a last line without its end


def _lines(text: str, first: bool) -> Iterator[str]:
    """The lines of ``text``, each with its ``\n``; a byte-order mark at the file's start dropped."""
    lines = (text.removeprefix("\ufeff") if first else text).split("\n")
    yield from (line + "\n" for line in lines[:-1])
    if lines[-1]:
        yield lines[-1]


def decoded(raw: bytes, where: str, encoding: str | None = None, offset: int = 0, line: int = 1) -> str:
    """``raw`` (the bytes of ``line`` at ``offset``, or a whole file) as text: UTF-8, or ``encoding``; a binary file,
    or a byte that is not UTF-8, is a ``CorpusError`` naming the byte offset and line."""
    if b"\x00" in raw and encoding is None:  # UTF-8 text never holds a NUL byte; binary files do
        raise CorpusError(f"{where}: not a text file (it holds NUL bytes); expected a zip or UTF-8 text")
    try:
        return raw.decode(encoding or "utf-8")
    except UnicodeDecodeError as error:
        line += raw.count(b"\n", 0, error.start)
        raise CorpusError(f"{where}: not {encoding or 'UTF-8'} text (byte 0x{raw[error.start]:02x} at offset "
                          f"{offset + error.start}, line {line}): save it as UTF-8, or name its encoding "
                          f"(data.encoding=cp1252, latin-1, ...)") from None
