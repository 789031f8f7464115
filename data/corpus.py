"""Find a run's corpus: the file given, the env var's, the shared copy, the cache, or the download.

The default, English–Spanish, is Tatoeba's sentence pairs as packaged by manythings.org (CC-BY 2.0 FR),
``spa-eng/spa.txt``; it is downloaded when nowhere to be found. Another pair with English is looked for
under its manythings names (``nld-eng.zip``, ``nld.txt``) in the same places; any other corpus is given
as ``data.corpus_path`` (``data/readers.py`` reads every format).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import urllib.request
import zipfile
from pathlib import Path

from data.atomic_file import atomic_file
from data.languages import LanguagePair, download_language

log = logging.getLogger(__name__)

DOWNLOAD_URL = "http://storage.googleapis.com/download.tensorflow.org/data/spa-eng.zip"
DOWNLOADABLE = "spa-eng.zip"  # the one corpus fetched when missing; other pairs: https://www.manythings.org/anki/
ENV_VAR = "SPA_ENG_DATA"  # a folder holding the corpus (spa-eng.zip, nld-eng.zip, ...), or the file itself
PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attention-from-scratch"


class CorpusNotFoundError(FileNotFoundError):
    """No corpus file anywhere we looked, and it could not be downloaded."""


class CorpusError(ValueError):
    """A corpus file that is not usable: not a zip or UTF-8 text, or mostly not sentence pairs."""


def _found(folder: Path, pair: LanguagePair) -> Path | None:
    return next((folder / name for name in pair.tatoeba_names() if (folder / name).is_file()), None)


def aligned_files(prefix: Path, pair: LanguagePair) -> tuple[Path, Path]:
    """``prefix.<source>`` and ``prefix.<target>`` (Moses style: ``corpus.en``, ``corpus.nl``)."""
    return prefix.with_name(f"{prefix.name}.{pair.source}"), prefix.with_name(f"{prefix.name}.{pair.target}")


def corpus_files(path: Path, pair: LanguagePair) -> list[Path]:
    """The files a located corpus reads: itself, or the two aligned files of a prefix."""
    return [path] if path.is_file() else list(aligned_files(path, pair))


def _given(given: Path, pair: LanguagePair) -> Path:
    """``data.corpus_path``: a file, a folder holding the pair's download, or an aligned files' prefix."""
    if given.is_file() or all(f.is_file() for f in aligned_files(given, pair)):
        return given
    if given.is_dir() and (found := _found(given, pair)):
        return found
    expected = " or ".join(pair.tatoeba_names()[:2]) or "a .tsv file"
    source, target = aligned_files(given, pair)
    raise CorpusNotFoundError(f"corpus path {given} does not exist (expected {expected}, a .tsv file, "
                              f"or aligned files {source.name} + {target.name})")


def locate_corpus(path: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None,
                  download: bool = True, sha256: str | None = None, pair: LanguagePair = LanguagePair()) -> Path:
    """Return the corpus of ``pair`` (a file, or the prefix of two aligned files), looking in order at:

    1. ``path`` (a .zip, .txt or .tsv file, a folder holding the pair's download, or a prefix);
    2. the folder or file named by the ``SPA_ENG_DATA`` environment variable (a file whose name says
       another language, ``nld-eng.zip`` for English–Spanish, is passed over);
    3. ``../shared/data/`` beside the project;
    4. the cache folder (a previous download), else, for English–Spanish, download it there
       (progress bar, zip check, and ``sha256`` check when given).
    """
    if path is not None:
        return _given(Path(path).expanduser(), pair)
    if os.environ.get(ENV_VAR):
        env_path = Path(os.environ[ENV_VAR]).expanduser()
        if env_path.is_file() and download_language(env_path.name) in (None, pair.other_than_english()):
            return env_path
        if found := _found(env_path, pair) if env_path.is_dir() else None:
            return found
        if not env_path.exists():
            raise CorpusNotFoundError(f"${ENV_VAR}={env_path} does not exist")
    cache = Path(cache_dir or DEFAULT_CACHE).expanduser()
    if found := _found(SHARED_DATA, pair) or _found(cache, pair):
        return found
    if not pair.tatoeba_names():
        raise CorpusNotFoundError(f"no corpus for {pair.describe()}: pass data.corpus_path=/path/to/a.tsv "
                                  f"(or aligned files' prefix)")
    cached = cache / pair.tatoeba_names()[0]
    if not download or cached.name != DOWNLOADABLE:
        raise CorpusNotFoundError(_where_to_put_it(cached))
    from filelock import FileLock

    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cached) + ".lock"):  # two first runs at once: one downloads, the other waits
        return cached if cached.is_file() else _download(cached, sha256)


def _where_to_put_it(cached: Path) -> str:
    origin = DOWNLOAD_URL if cached.name == DOWNLOADABLE else "https://www.manythings.org/anki/"
    return (
        f"Tatoeba corpus not found and not downloadable. Put {cached.name} (from {origin}) at {cached}, "
        f"or set {ENV_VAR}=/folder/with/{cached.name}, or pass data.corpus_path=/path/to/{cached.name}"
    )


def _download(target: Path, sha256: str | None) -> Path:
    from tqdm.auto import tqdm

    target.parent.mkdir(parents=True, exist_ok=True)
    try:  # written whole or not at all: checked before it takes the corpus's name
        with atomic_file(target, "wb") as out:
            with urllib.request.urlopen(DOWNLOAD_URL, timeout=30) as response:
                total = int(response.headers.get("Content-Length", 0)) or None
                with tqdm.wrapattr(out, "write", total=total, desc="spa-eng.zip") as written:  # a progress bar
                    shutil.copyfileobj(response, written)
            out.flush()
            digest = hashlib.sha256(Path(out.name).read_bytes()).hexdigest()
            if sha256 and digest != sha256:
                raise CorpusNotFoundError(f"downloaded spa-eng.zip has sha256 {digest}, expected {sha256}")
            try:
                with zipfile.ZipFile(out.name) as archive:  # raises BadZipFile on a truncated download
                    if archive.testzip() is not None or not any(n.endswith("spa.txt") for n in archive.namelist()):
                        raise zipfile.BadZipFile
            except zipfile.BadZipFile:
                raise CorpusNotFoundError("downloaded spa-eng.zip is damaged or holds no spa.txt") from None
    except OSError as error:
        raise CorpusNotFoundError(f"{_where_to_put_it(target)} (download failed: {error})") from error
    log.info("downloaded %s (sha256 %s)", target, digest)
    return target
