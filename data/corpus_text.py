"""A corpus file's text: a manythings zip's one sentence-pair file or the file itself, decoded without replacing a
byte (UTF-8, or the encoding ``data.encoding`` names); a binary file, or a byte that is not of the encoding, is a
``CorpusError`` naming where it is."""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

from data.corpus import CorpusError
from data.languages import LanguagePair, download_language, language_name


def decoded(raw: bytes, where: str, encoding: str | None = None) -> str:
    """``raw`` as text: UTF-8 (a byte-order mark dropped), or ``encoding``; a binary file, or a byte that is not
    UTF-8, is a ``CorpusError`` naming the byte offset and line."""
    if b"\x00" in raw and encoding is None:  # UTF-8 text never holds a NUL byte; binary files do
        raise CorpusError(f"{where}: not a text file (it holds NUL bytes); expected a zip or UTF-8 text")
    try:
        return raw.decode(encoding or "utf-8-sig").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise CorpusError(f"{where}: not {encoding or 'UTF-8'} text (byte 0x{raw[error.start]:02x} at offset "
                          f"{error.start}, line {line}): save it as UTF-8, or name its encoding "
                          f"(data.encoding=cp1252, latin-1, ...)") from None


def check_tatoeba_language(path: Path, member: str, pair: LanguagePair) -> None:
    other = pair.other_than_english()
    if other is None:
        raise CorpusError(f"{path}: a Tatoeba download pairs English with one language, and {pair.describe()} has "
                          f"no English side; give a .tsv or aligned files for it")
    said = download_language(member)
    if said is not None and said != other:
        raise CorpusError(f"{path}: holds English–{language_name(said)} ({member}), not {pair.describe()}: "
                          f"set data.source_lang / data.target_lang to its languages")


def file_text(path: Path, pair: LanguagePair, encoding: str | None = None) -> str:
    """The text of a corpus file; of a zip, its one sentence-pair ``.txt`` (a manythings download: not
    ``_about.txt``, not ``__MACOSX/``), its language checked against the pair's."""
    if path.suffix.lower() != ".zip" and not zipfile.is_zipfile(path):
        return decoded(path.read_bytes(), str(path), encoding)
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
            raw = archive.read(member)
    except (zipfile.BadZipFile, EOFError, OSError) as error:  # truncated or damaged
        raise CorpusError(f"{path}: not a readable zip archive ({error})") from None
    return decoded(raw, f"{path}:{member}", encoding)
