"""data/cache.py: preparing a corpus holds memory that does not grow with it, and a corpus the machine cannot hold is
refused in one line before any work."""

import random

import pytest

from benchmark_prepare import prepare
from data.cache import DataCacheError, check_memory
from data.datamodule import TranslationDataModule

WORDS = dict(zip("cat dog house tree river stone bread water light road book song door hand city".split(),
                 "gato perro casa árbol río piedra pan agua luz camino libro canción puerta mano ciudad".split()))
NAMES = ["Tom", "Mary", "Oluwaseun", "Zhang", "Ana"]


def generated_corpus(path, pairs: int, seed: int = 0):
    """``pairs`` distinct sentence pairs of a made-up language pair: words, names and numbers, each pair its own."""
    draw = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        out.write("en\tes\n")
        for i in range(pairs):
            words, name = draw.choices(list(WORDS), k=draw.randint(2, 5)), draw.choice(NAMES)
            out.write(f"{name} sees {i} {' '.join(words)}.\t{name} ve {i} {' '.join(WORDS[w] for w in words)}.\n")
    return path


def test_preparing_ten_times_the_pairs_holds_about_the_same_memory(tmp_path):
    # What it guards against: a stage holding Python objects per pair and position (the alignment teacher's, which
    # grew past 24 GB at 300,000 pairs). Bounded against the same code's run on a tenth of the pairs, measured here:
    # the larger one adds its text and ids, and a tokenizing process per core (their own memory).
    settings = {"learn_pairs": 20_000, "vocab_size": 500}
    small = prepare(generated_corpus(tmp_path / "small.tsv", 5_000), tmp_path / "small", settings)
    large = prepare(generated_corpus(tmp_path / "large.tsv", 50_000), tmp_path / "large", settings)
    assert large["stages"].startswith("read") and "alignments" not in large["stages"]  # no aligned head: no teacher
    text = (tmp_path / "large.tsv").stat().st_size
    assert large["peak_rss"] < 1.3 * small["peak_rss"] + 20 * text, (small, large)


def test_a_corpus_the_machine_cannot_hold_is_refused_before_it_is_read(tmp_path, monkeypatch):
    with pytest.raises(DataCacheError, match=r"^\[Errno 12\] preparing 1\.0 GB of corpus text needs about 7\.0 GB "
                                             r"of memory and 4\.0 GB are free: set data\.limit_pairs"):
        check_memory(10**9, available=4 * 10**9)
    check_memory(10**8, available=4 * 10**9)  # room enough: nothing said
    corpus = generated_corpus(tmp_path / "pairs.tsv", 100)
    monkeypatch.setattr("data.cache.available_memory", lambda: 10**6)
    datamodule = TranslationDataModule(corpus_path=str(corpus), cache_dir=str(tmp_path / "cache"), vocab_size=300)
    with pytest.raises(DataCacheError, match="are free: set data.limit_pairs"):
        datamodule.setup()
    assert not list((tmp_path / "cache").glob("*/splits"))  # nothing was built
