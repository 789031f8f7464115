"""Leak-free, seeded train / validation / test splits as a ``datasets.DatasetDict``.

Tatoeba lists one sentence many times, once per translation ("Go." → "Ve.", "Vete.", "Vaya."; and,
trained the other way, "Ve." → "Go.", "Go away."), and near-copies differ only in case or punctuation
("Go!"). A random split by line would put the same sentence in train and test, so we split by
*sentence group*: every pair whose source side normalizes to the same key (lower-case, letters and
digits only, in any script) lands in the same split, whichever direction is trained.

Train keeps one row per pair. Validation and test keep one row per distinct source sentence, with
all of its translations as references for multi-reference BLEU, up to a share of the pairs and at most
``max_pairs`` pairs each: a corpus of millions gets a test split of a few thousand, as WMT's are.

The pairs live in an Arrow table and the groups in NumPy arrays, so splitting ten million pairs holds their
text and a few numbers per pair, never a Python object per pair.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict
from tqdm.auto import tqdm

from data.corpus import CorpusError
from data.languages import UNSPACED_SCRIPT


NOT_ALNUM = re.compile(r"[\W_]+")  # what ``str.isalnum`` rejects: ``\W`` is its complement, with "_"
TEXT = pa.large_string()  # offsets of 64 bits: a column may hold more than 2 GB of text
CHUNK = 100_000  # pairs per Arrow batch while reading
PERCENT_BAR = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]"  # (a bar over passes, not pairs)


def group_key(source: str) -> str:
    """Normalization that decides leakage: 'Go!' and 'go.' are the same sentence."""
    return NOT_ALNUM.sub("", source.lower())


def group_keys(sources: pa.Array) -> pa.Array:
    """``group_key`` of each source: in Arrow for the ASCII ones (most, in most corpora), in Python for the rest."""
    ascii_keys = pc.replace_substring_regex(pc.ascii_lower(sources), "[^a-z0-9]+", "")
    ascii_rows = pc.string_is_ascii(sources).to_numpy(zero_copy_only=False)
    if ascii_rows.all():
        return ascii_keys.cast(TEXT)
    keys = ascii_keys.to_numpy(zero_copy_only=False)
    others = np.flatnonzero(~ascii_rows)
    keys[others] = [group_key(source) for source in sources.take(others).to_pylist()]
    return pa.array(keys, TEXT)


def word_pattern(words: list[str]) -> re.Pattern:
    """Any of ``words``, whole and in any case: a topic (``data.exclude_words``, ``scripts/export_split.py --words``).
    A word of a script without spaces (医生, หมอ) is found inside its text, where no word boundary marks it."""
    alternatives = [re.escape(word) if UNSPACED_SCRIPT.search(word) else rf"\b{re.escape(word)}\b" for word in words]
    return re.compile("|".join(alternatives), re.IGNORECASE)


def column(split, name: str) -> list:
    """A column of a ``datasets.Dataset`` as a Python list, in one Arrow conversion."""
    return split.with_format("arrow")[name].to_pylist()


def pair_table(pairs: Iterable[tuple[str, str]]) -> pa.Table:
    """``(source, target)`` pairs as an Arrow table (``src``, ``tgt``), built ``CHUNK`` pairs at a time."""
    schema = pa.schema({"src": TEXT, "tgt": TEXT})
    batches, pairs = [], iter(pairs)
    while chunk := list(itertools.islice(pairs, CHUNK)):
        batches.append(pa.record_batch([pa.array([s for s, _ in chunk], TEXT), pa.array([t for _, t in chunk], TEXT)],
                                       schema=schema))
    return pa.Table.from_batches(batches, schema)


def split_pairs(pairs: pa.Table | Sequence[tuple[str, str]], val_fraction: float = 0.02, test_fraction: float = 0.02,
                seed: int = 1234, max_pairs: int | None = None) -> DatasetDict:
    """Assign whole sentence groups of ``pairs`` (a ``pair_table`` or ``(source, target)`` tuples) to splits,
    deterministically for a seed: the distinct group keys in sorted order, shuffled, fill validation then test up
    to their share of the pairs (and ``max_pairs``); the rest is train. Returns splits with columns ``src``,
    ``tgt`` and, for validation and test, ``refs``."""
    if not 0 <= val_fraction < 1 or not 0 <= test_fraction < 1 or val_fraction + test_fraction >= 1:
        raise ValueError(f"bad split fractions: validation {val_fraction}, test {test_fraction}")
    table = pairs if isinstance(pairs, pa.Table) else pair_table(pairs)
    n, splits = table.num_rows, {}
    with tqdm(total=3 * n, desc="splitting", delay=5, leave=False, bar_format=PERCENT_BAR) as bar:  # three passes
        keys = [pa.array([], TEXT)]
        for chunk in table["src"].chunks:
            keys.append(group_keys(chunk))
            bar.update(len(chunk))
        keys = pa.concat_arrays(keys)
        split_of_row, rank_of_row = _assigned(keys, val_fraction, test_fraction, seed, max_pairs)
        bar.update(n)
        for code, name in enumerate(("train", "validation", "test")):
            rows = np.flatnonzero(split_of_row == code)
            rows = rows[np.argsort(rank_of_row[rows], kind="stable")]  # by key, then in corpus order
            if code == 0:
                order = np.random.default_rng(seed).permutation(len(rows))  # as ``Dataset.shuffle(seed)``
                part = table.take(rows[order])
            else:
                part = pa.table(with_references(table.take(rows)))
                order = np.random.default_rng(seed).permutation(part.num_rows)
                part = part.take(order) if n else part
            fingerprint = hashlib.sha256(rows[order].tobytes() if n else b"").hexdigest()[:16] + f"-{seed}-{n}"
            splits[name] = Dataset(part, fingerprint=fingerprint)
            bar.update(len(rows))
    return DatasetDict(splits)


def _assigned(keys: pa.Array, val_fraction: float, test_fraction: float, seed: int,
              max_pairs: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's split (0 train, 1 validation, 2 test) and its group's rank in the sorted keys, from the rows'
    group ``keys``: ``split_pairs``' rule."""
    n, groups = len(keys), pc.dictionary_encode(keys)
    group_of_row = groups.indices.to_numpy(zero_copy_only=False)  # (pairs,)
    sizes = np.bincount(group_of_row, minlength=len(groups.dictionary))  # (groups,) pairs in each
    # Arrow sorts UTF-8 by its bytes, which is the code points' order: Python's ``sorted`` of the keys.
    sorted_groups = pc.array_sort_indices(groups.dictionary).to_numpy()
    shuffled = list(range(len(sorted_groups)))
    random.Random(seed).shuffle(shuffled)  # positions in the sorted keys, as ``shuffle(sorted(keys))`` orders them
    targets = {1: min(val_fraction * n, max_pairs or n), 2: min(test_fraction * n, max_pairs or n)}
    split_of_group, filled = np.zeros(len(sizes), np.int8), {1: 0, 2: 0}  # 0 train, 1 validation, 2 test
    for position in shuffled:
        split = next((s for s in (1, 2) if filled[s] < targets[s]), None)
        if split is None:  # both full: the rest is train
            break
        split_of_group[sorted_groups[position]] = split
        filled[split] += int(sizes[sorted_groups[position]])
    if n and not (split_of_group == 0).any():
        raise CorpusError(f"{n} pairs ({len(sizes)} distinct source sentences) are too few to split: validation "
                          f"({val_fraction:g}) and test ({test_fraction:g}) each take at least one source sentence "
                          f"with all its translations, and training needs the rest: give at least "
                          f"{1 + (val_fraction > 0) + (test_fraction > 0)} distinct sentences, many more to learn")
    rank_of_group = np.empty(len(sizes), np.int64)
    rank_of_group[sorted_groups] = np.arange(len(sizes))
    return split_of_group[group_of_row], rank_of_group[group_of_row]


def with_references(part: pa.Table) -> dict[str, pa.Array]:
    """One row per distinct source of ``part`` (in order of first sight), all its targets as references."""
    references: dict[str, list[str]] = defaultdict(list)
    for source, target in zip(part["src"].to_pylist(), part["tgt"].to_pylist()):
        references[source].append(target)
    return {"src": pa.array(list(references), TEXT), "tgt": pa.array([refs[0] for refs in references.values()], TEXT),
            "refs": pa.array(list(references.values()), pa.list_(TEXT))}
