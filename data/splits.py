"""Leak-free, seeded train / validation / test splits as a ``datasets.DatasetDict``.

Tatoeba lists one sentence many times, once per translation ("Go." → "Ve.", "Vete.", "Vaya."; and,
trained the other way, "Ve." → "Go.", "Go away."), and near-copies differ only in case or punctuation
("Go!"). A random split by line would put the same sentence in train and test, so we split by
*sentence group*: every pair whose source side normalizes to the same key (lower-case, letters and
digits only, in any script) lands in the same split, whichever direction is trained.

Train keeps one row per pair. Validation and test keep one row per distinct source sentence, with
all of its translations as references for multi-reference BLEU.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import defaultdict

import pyarrow as pa
from datasets import Dataset, DatasetDict

from data.corpus import CorpusError
from data.languages import UNSPACED_SCRIPT


def group_key(source: str) -> str:
    """Normalization that decides leakage: 'Go!' and 'go.' are the same sentence."""
    return "".join(ch for ch in source.lower() if ch.isalnum())


def word_pattern(words: list[str]) -> re.Pattern:
    """Any of ``words``, whole and in any case: a topic (``data.exclude_words``, ``scripts/export_split.py --words``).
    A word of a script without spaces (医生, หมอ) is found inside its text, where no word boundary marks it."""
    alternatives = [re.escape(word) if UNSPACED_SCRIPT.search(word) else rf"\b{re.escape(word)}\b" for word in words]
    return re.compile("|".join(alternatives), re.IGNORECASE)


def dataset(columns: dict[str, list]) -> Dataset:
    """A ``Dataset`` of ``columns``, fingerprinted by a hash of their JSON text. (``Dataset.from_dict``
    fingerprints by pickling the whole Arrow table with dill: slower, and on some Python 3.12 builds
    it fails on pyarrow's types.)"""
    fingerprint = hashlib.sha256(json.dumps(columns, ensure_ascii=False).encode()).hexdigest()[:16]
    return Dataset(pa.Table.from_pydict(columns), fingerprint=fingerprint)


def column(split, name: str) -> list:
    """A column of a ``datasets.Dataset`` as a Python list, in one Arrow conversion."""
    return split.with_format("arrow")[name].to_pylist()


def split_pairs(
    pairs: list[tuple[str, str]],
    val_fraction: float = 0.02,
    test_fraction: float = 0.02,
    seed: int = 1234,
) -> DatasetDict:
    """Assign whole sentence groups of ``(source, target)`` pairs to splits, deterministically for a seed.

    Returns splits with columns ``src``, ``tgt``, ``refs`` (train: ``refs == [tgt]``).
    """
    if not 0 <= val_fraction < 1 or not 0 <= test_fraction < 1 or val_fraction + test_fraction >= 1:
        raise ValueError(f"bad split fractions: validation {val_fraction}, test {test_fraction}")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, (source, _) in enumerate(pairs):
        groups[group_key(source)].append(i)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    # Fill validation and test up to their share of *pairs*, then the rest is train.
    targets = {"validation": val_fraction * len(pairs), "test": test_fraction * len(pairs)}
    assigned: dict[str, list[str]] = {"validation": [], "test": [], "train": []}
    filled = {"validation": 0, "test": 0, "train": 0}  # pairs assigned to each split so far
    for key in keys:
        split = next((s for s in ("validation", "test") if filled[s] < targets[s]), "train")
        assigned[split].append(key)
        filled[split] += len(groups[key])
    if pairs and not assigned["train"]:
        raise CorpusError(f"{len(pairs)} pairs ({len(groups)} distinct source sentences) are too few to split: "
                          f"validation ({val_fraction:g}) and test ({test_fraction:g}) each take at least one source "
                          f"sentence with all its translations, and training needs the rest: give at least "
                          f"{1 + (val_fraction > 0) + (test_fraction > 0)} distinct sentences, many more to learn")

    def rows(split: str) -> dict[str, list]:
        # Validation and test: one row per distinct source sentence, every translation a reference; train: a row
        # per pair. A row's key: (source,) or (source, pair number).
        references: dict[tuple, list[str]] = defaultdict(list)
        for key in sorted(assigned[split]):
            for i in groups[key]:
                source, target = pairs[i]
                references[(source,) if split != "train" else (source, i)].append(target)
        rows_of_split = list(references.items())
        return {"src": [row[0] for row, _ in rows_of_split], "tgt": [refs[0] for _, refs in rows_of_split],
                "refs": [refs for _, refs in rows_of_split]}

    splits = DatasetDict({split: dataset(rows(split)) for split in ("train", "validation", "test")})
    return splits.shuffle(seed=seed).flatten_indices() if len(pairs) else splits

