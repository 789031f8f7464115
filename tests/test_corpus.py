"""data/corpus.py: finding a pair's corpus where a user's clone would, and the one download."""

import hashlib
import io
import threading
import time
import zipfile

import pytest

from data import corpus
from data.corpus import CorpusNotFoundError, locate_corpus
from data.languages import LanguagePair


def test_locate_order(tmp_path, monkeypatch):
    given = tmp_path / "given.txt"
    given.write_text("Go.\tVe.\n")
    assert locate_corpus(given) == given
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / "spa-eng.zip").write_bytes(b"")
    monkeypatch.setenv(corpus.ENV_VAR, str(folder))
    assert locate_corpus(None) == folder / "spa-eng.zip"
    monkeypatch.delenv(corpus.ENV_VAR)
    shared = tmp_path / "shared" / "spa-eng.zip"
    shared.parent.mkdir()
    shared.write_bytes(b"")
    monkeypatch.setattr(corpus, "SHARED_DATA", shared.parent)
    assert locate_corpus(None) == shared  # ../shared/data beside the project comes next
    with pytest.raises(CorpusNotFoundError, match="does not exist"):
        locate_corpus(tmp_path / "missing.zip")


def test_missing_file_offline_gives_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv(corpus.ENV_VAR, raising=False)
    monkeypatch.setattr(corpus, "SHARED_DATA", tmp_path / "nothing")
    monkeypatch.setattr(corpus, "DOWNLOAD_URL", "http://127.0.0.1:9/spa-eng.zip")  # refused at once
    for download in (False, True):
        with pytest.raises(CorpusNotFoundError) as error:
            locate_corpus(None, cache_dir=tmp_path / "cache", download=download)
        message = str(error.value)
        assert "Put spa-eng.zip" in message and str(tmp_path / "cache" / "spa-eng.zip") in message
        assert "\n" not in message


def test_two_first_runs_download_once(tmp_path, monkeypatch):
    monkeypatch.delenv(corpus.ENV_VAR, raising=False)
    monkeypatch.setattr(corpus, "SHARED_DATA", tmp_path / "nothing")
    downloads = []

    def slow_download(target, sha256):  # stands in for the network: writes the zip, slowly
        downloads.append(target)
        time.sleep(0.5)
        with zipfile.ZipFile(target, "w") as z:
            z.writestr("spa-eng/spa.txt", "Go.\tVe.\n")
        return target

    monkeypatch.setattr(corpus, "_download", slow_download)
    found = []
    threads = [threading.Thread(target=lambda: found.append(locate_corpus(None, cache_dir=tmp_path / "cache")))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(downloads) == 1 and found == [tmp_path / "cache" / "spa-eng.zip"] * 2


class Response(io.BytesIO):
    """What ``urllib.request.urlopen`` answers, for bytes at hand."""

    headers = {}


def test_a_download_is_kept_only_when_whole(tmp_path, monkeypatch):
    # The network stands in: a response whose bytes are a good zip, then one cut short.
    archive = tmp_path / "good.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("spa-eng/spa.txt", "Go.\tVe.\n")
    good = archive.read_bytes()
    target = tmp_path / "cache" / "spa-eng.zip"
    for body, whole in ((good[: len(good) // 2], False), (good, True)):
        monkeypatch.setattr(corpus.urllib.request, "urlopen", lambda *a, body=body, **k: Response(body))
        if whole:
            assert corpus._download(target, hashlib.sha256(good).hexdigest()) == target
            assert target.read_bytes() == good
        else:
            with pytest.raises(CorpusNotFoundError, match="damaged or holds no spa.txt"):
                corpus._download(target, None)
            with pytest.raises(CorpusNotFoundError, match="has sha256"):
                corpus._download(target, "0" * 64)
            assert list(target.parent.iterdir()) == []  # nothing half-downloaded under any name


def test_each_pair_is_looked_for_under_its_own_names(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("spa-eng.zip", "nld-eng.zip"):
        (shared / name).write_bytes(b"")
    monkeypatch.setattr(corpus, "SHARED_DATA", shared)
    monkeypatch.setenv(corpus.ENV_VAR, str(shared / "spa-eng.zip"))  # a file for another pair is passed over
    assert locate_corpus(None, pair=LanguagePair("en", "nl")) == shared / "nld-eng.zip"
    assert locate_corpus(None, pair=LanguagePair("nl", "en")) == shared / "nld-eng.zip"  # either direction
    assert locate_corpus(None, pair=LanguagePair("es", "en")) == shared / "spa-eng.zip"
    assert locate_corpus(shared, pair=LanguagePair("en", "nl")) == shared / "nld-eng.zip"  # a folder given
    (tmp_path / "mine.txt").write_bytes(b"")  # a file named by the user is taken as it is
    monkeypatch.setenv(corpus.ENV_VAR, str(tmp_path / "mine.txt"))
    assert locate_corpus(None, pair=LanguagePair("en", "nl")) == tmp_path / "mine.txt"
    monkeypatch.delenv(corpus.ENV_VAR)
    with pytest.raises(CorpusNotFoundError, match=r"Put fra-eng\.zip \(from https://www\.manythings\.org/anki/\)"):
        locate_corpus(None, cache_dir=tmp_path / "cache", pair=LanguagePair("en", "fr"))  # never downloaded
    with pytest.raises(CorpusNotFoundError, match="no corpus for French→German: pass data.corpus_path"):
        locate_corpus(None, cache_dir=tmp_path / "cache", pair=LanguagePair("fr", "de"))


def test_aligned_files_are_found_by_their_prefix(tmp_path):
    for language in ("en", "nl"):
        (tmp_path / f"corpus.{language}").write_text("Hi.\n", encoding="utf-8")
    assert locate_corpus(tmp_path / "corpus", pair=LanguagePair("en", "nl")) == tmp_path / "corpus"
    with pytest.raises(CorpusNotFoundError, match=r"aligned files corpus\.en \+ corpus\.fr"):
        locate_corpus(tmp_path / "corpus", pair=LanguagePair("en", "fr"))  # no corpus.fr
