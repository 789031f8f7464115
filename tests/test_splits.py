"""data/splits.py: leak-free, deterministic splits that account for every pair."""

from collections import Counter, defaultdict

import pytest

from data.corpus import CorpusError
from data.languages import LanguagePair
from data.readers import read_pairs
from data.splits import group_key, split_pairs


def test_group_key_ignores_case_and_punctuation():
    assert group_key("Go!") == group_key("go.") == "go"
    assert group_key("¿Qué?") == "qué"


def test_real_splits_are_leak_free_and_complete(full_datamodule):
    splits = full_datamodule.splits
    keys = {name: {group_key(s) for s in split["src"]} for name, split in splits.items()}
    assert not keys["train"] & keys["validation"]
    assert not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]
    counted = len(splits["train"]) + sum(len(r) for name in ("validation", "test") for r in splits[name]["refs"])
    assert counted == full_datamodule.report.kept  # corpus minus the reported skipped lines
    n = full_datamodule.report.kept
    for name in ("validation", "test"):  # ~2% of the pairs each
        pairs = sum(len(r) for r in splits[name]["refs"])
        assert 0.019 * n <= pairs <= 0.025 * n
    multi = [r for r in splits["test"]["refs"] if len(r) > 1]
    assert len(multi) > 100  # alternative translations kept together as references


def test_every_pair_in_exactly_one_split_and_deterministic():
    pairs = [(f"Sentence {i % 50}{'!' if i % 3 else '.'}", f"Frase {i}") for i in range(400)]
    pairs += [("Go.", "Ve."), ("Go!", "¡Vete!"), ("go", "Vaya.")]
    a, b = split_pairs(pairs, 0.1, 0.1, seed=7), split_pairs(pairs, 0.1, 0.1, seed=7)
    assert a["train"]["src"] == b["train"]["src"] and a["test"]["refs"] == b["test"]["refs"]
    seen = Counter()
    for name, split in a.items():
        for src, refs in zip(split["src"], split["refs"]):
            for ref in refs:
                seen[(src, ref)] += 1
    assert seen == Counter(pairs)
    where = {name: {group_key(s) for s in split["src"]} for name, split in a.items()}
    assert sum("go" in keys for keys in where.values()) == 1
    assert split_pairs(pairs, 0.1, 0.1, seed=8)["test"]["src"] != a["test"]["src"]


def test_the_reversed_corpus_splits_by_the_spanish_side_leak_free(corpus_path):
    # Spanish→English from the same file: groups are Spanish sentences, every English one a reference.
    pairs, _ = read_pairs(corpus_path, LanguagePair("es", "en"))
    assert pairs[0] == ("Ve.", "Go.") and len(pairs) == 116_668
    pairs = pairs[:30_000]  # the short sentences, where one Spanish sentence has the most English ones
    splits = split_pairs(pairs, 0.02, 0.02, seed=1234)
    keys = {name: {group_key(s) for s in split["src"]} for name, split in splits.items()}
    assert not keys["train"] & keys["validation"] and not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]
    targets = defaultdict(set)
    for source, target in pairs:
        targets[source].add(target)
    for source, refs in zip(splits["test"]["src"], splits["test"]["refs"]):
        assert set(refs) == targets[source]  # all of a source's translations, and only those
    assert sum(len(refs) > 1 for refs in splits["test"]["refs"]) > 10  # alternatives kept together


def test_a_corpus_too_small_for_its_splits_is_refused_in_one_line():
    with pytest.raises(CorpusError, match=r"^2 pairs \(2 distinct source sentences\) are too few to split: .* give at "
                                          r"least 3 distinct sentences"):
        split_pairs([("Hello.", "Hola."), ("Go.", "Ve.")])
    assert len(split_pairs([("Hello.", "Hola."), ("Go.", "Ve."), ("Run.", "Corre.")])["train"]) == 1
