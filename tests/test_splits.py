"""data/splits.py: leak-free, deterministic splits that account for every pair."""

import io
import random
from collections import Counter, defaultdict

import numpy as np
import pyarrow as pa
import pytest
from tqdm import tqdm

from data import splits as splits_module
from data.corpus import CorpusError
from data.languages import LanguagePair
from data.readers import read_pairs
from data.splits import group_key, group_keys, pair_table, split_pairs

SHOWN_AT_ONCE = {"delay": 0, "mininterval": 0, "file": io.StringIO()}  # (a bar in a test: drawn, not seen)


def test_group_key_ignores_case_and_punctuation():
    assert group_key("Go!") == group_key("go.") == "go"
    assert group_key("¿Qué?") == "qué"


def test_group_key_keeps_what_isalnum_keeps_in_every_script():
    for code in range(0x30000):  # every plane with letters and digits in use
        text = f"x_{chr(code)}!"
        assert group_key(text) == "".join(c for c in text.lower() if c.isalnum()), hex(code)


def test_the_keys_of_a_column_are_those_of_each_source():
    sources = ["Go!", "go.", "¿Qué?", "İstanbul", "A_b 1²", "", "Ça va", "TOM's 2 cats", "ẞ straße"]
    for chunk in (sources, sources[:2], sources[2:3]):
        assert group_keys(pa.array(chunk, pa.large_string())).to_pylist() == [group_key(s) for s in chunk]


def reference_split(pairs, val_fraction, test_fraction, seed, max_pairs=None):
    """The splits as a Python dict of groups decides them (the reading this module's arrays must give)."""
    groups = defaultdict(list)
    for i, (source, _) in enumerate(pairs):
        groups["".join(c for c in source.lower() if c.isalnum())].append(i)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    targets = {"validation": min(val_fraction * len(pairs), max_pairs or len(pairs)),
               "test": min(test_fraction * len(pairs), max_pairs or len(pairs))}
    assigned, filled = defaultdict(list), Counter()
    for key in keys:
        split = next((s for s in ("validation", "test") if filled[s] < targets[s]), "train")
        assigned[split].append(key)
        filled[split] += len(groups[key])
    result = {}
    for split in ("train", "validation", "test"):
        rows = defaultdict(list)
        for key in sorted(assigned[split]):
            for i in groups[key]:
                rows[(pairs[i][0],) if split != "train" else (pairs[i][0], i)].append(pairs[i][1])
        order = np.random.default_rng(seed).permutation(len(rows))  # datasets' shuffle(seed)
        rows = list(rows.items())
        result[split] = [(rows[i][0][0], rows[i][1]) for i in order]
    return result


@pytest.mark.parametrize("max_pairs", [None, 12])
def test_the_arrays_split_as_the_groups_say(max_pairs, monkeypatch):
    generator = random.Random(5)
    pairs = [(f"{generator.choice(['Go', 'go', 'Run', 'Wait', 'Ça va'])} {generator.randrange(60)}"
              f"{generator.choice('.!?')}", f"t{i}") for i in range(500)]
    expected = reference_split(pairs, 0.05, 0.05, 11, max_pairs)
    bars = []  # the bar made, drawn at every step: its passes add up to the whole
    monkeypatch.setattr(splits_module, "tqdm", lambda **options: bars.append(tqdm(**options | SHOWN_AT_ONCE)) or bars[-1])
    splits = split_pairs(pair_table(pairs), 0.05, 0.05, seed=11, max_pairs=max_pairs)
    assert bars[0].desc == "splitting" and bars[0].n == bars[0].total > 0
    assert list(zip(splits["train"]["src"], [[t] for t in splits["train"]["tgt"]])) == expected["train"]
    for name in ("validation", "test"):
        assert list(zip(splits[name]["src"], splits[name]["refs"])) == expected[name]
        assert max_pairs is None or sum(map(len, splits[name]["refs"])) < max_pairs + 10  # a group may pass it


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
        for src, refs in zip(split["src"], split["refs"] if name != "train" else ([t] for t in split["tgt"])):
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
