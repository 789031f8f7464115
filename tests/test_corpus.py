"""data/corpus.py: locating and parsing the corpus, with every skipped line accounted for."""

import hashlib
import io
import threading
import time
import unicodedata
import zipfile

import pytest

from data import corpus
from data.corpus import CorpusError, CorpusNotFoundError, load_pairs, locate_corpus, parse_lines


def test_messy_file_loads_with_right_counts_and_report(tmp_path, caplog):
    decomposed = unicodedata.normalize("NFD", "Él está aquí.")  # not NFC
    lines = [
        "Go.\tVe.",
        "Hi.\tHola.\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM)",  # 3 columns
        "no tab at all",  # malformed
        "a\tb\tc\td",  # malformed: 4 columns
        "",  # empty
        "Empty spanish.\t   ",  # empty side
        f"He is here.\t{decomposed}",
        "  Spaces around.  \t  Espacios.  ",
    ]
    path = tmp_path / "spa.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        pairs, report = load_pairs(path)
    assert pairs == [("Go.", "Ve."), ("Hi.", "Hola."), ("He is here.", "Él está aquí."),
                     ("Spaces around.", "Espacios.")]
    assert (report.kept, report.skipped_malformed, report.skipped_empty) == (4, 2, 2)
    assert report.three_columns == 1 and report.renormalized >= 1
    assert report.kept + report.skipped == len(lines)
    assert len([r for r in caplog.records if "skipped 4 lines" in r.getMessage()]) == 1  # reported once


def test_zip_and_invalid_utf8(tmp_path):
    archive = tmp_path / "spa-eng.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("spa-eng/spa.txt", b"Go.\tVe.\nBad \xff byte.\tMal.\n")
    pairs, report = load_pairs(archive)
    assert pairs[0] == ("Go.", "Ve.") and pairs[1] == ("Bad \ufffd byte.", "Mal.")


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
    monkeypatch.setattr(corpus, "SHARED_COPY", shared)
    assert locate_corpus(None) == shared  # ../shared/data beside the project comes next
    with pytest.raises(CorpusNotFoundError, match="does not exist"):
        locate_corpus(tmp_path / "missing.zip")


def test_missing_file_offline_gives_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv(corpus.ENV_VAR, raising=False)
    monkeypatch.setattr(corpus, "SHARED_COPY", tmp_path / "nothing.zip")
    monkeypatch.setattr(corpus, "DOWNLOAD_URL", "http://127.0.0.1:9/spa-eng.zip")  # refused at once
    for download in (False, True):
        with pytest.raises(CorpusNotFoundError) as error:
            locate_corpus(None, cache_dir=tmp_path / "cache", download=download)
        message = str(error.value)
        assert "Put spa-eng.zip" in message and str(tmp_path / "cache" / "spa-eng.zip") in message
        assert "\n" not in message


def test_parse_counts_on_real_corpus(full_datamodule):
    report = full_datamodule.report
    lines = corpus.corpus_lines(full_datamodule._source_description()["corpus"])
    assert report.kept + report.skipped == len(lines) == 116_668
    assert parse_lines(lines[:5])[0][0] == ("Go.", "Ve.")


def test_two_first_runs_download_once(tmp_path, monkeypatch):
    monkeypatch.delenv(corpus.ENV_VAR, raising=False)
    monkeypatch.setattr(corpus, "SHARED_COPY", tmp_path / "nothing.zip")
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


def test_a_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "spa.txt"
    path.write_bytes("\ufeffWait!\t¡Espera!\nGo.\tVe.\n".encode())
    assert load_pairs(path)[0] == [("Wait!", "¡Espera!"), ("Go.", "Ve.")]


def test_files_that_are_not_this_corpus_are_refused_naming_them(tmp_path):
    truncated = tmp_path / "spa-eng.zip"
    with zipfile.ZipFile(truncated, "w") as z:
        z.writestr("spa-eng/spa.txt", "Go.\tVe.\n" * 1000)
    truncated.write_bytes(truncated.read_bytes()[:200])
    with pytest.raises(CorpusError, match=r"spa-eng\.zip: not a readable zip archive"):
        load_pairs(truncated)
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 50)
    with pytest.raises(CorpusError, match=r"model\.bin: not a text file"):
        load_pairs(binary)
    prose = tmp_path / "notes.txt"  # text, but mostly not pairs: more malformed lines than pairs
    prose.write_text("Go.\tVe.\n" + "Just a line of prose.\n" * 2, encoding="utf-8")
    with pytest.raises(CorpusError, match=r"notes\.txt: 2 malformed lines against 1 English<TAB>Spanish pairs"):
        load_pairs(prose)
    with pytest.raises(CorpusNotFoundError, match="does not exist"):
        load_pairs(tmp_path / "missing.txt")
