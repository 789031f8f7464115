"""The data cache: a corpus's splits, how it was read, its tokenizer, its token ids and, for a run with an aligned
head, the training pairs' token alignments (``data/ibm2.py``) in one folder per settings,
``<cache_dir>/<settings hash>/``; built once, one process at a time (a file lock), and a build killed or failed
midway leaves nothing a later one would take for finished.

What grows with the corpus streams: the splits are Arrow files, the tokenizer, copy slots and casing counts learn
from a seeded sample of ``learn_pairs`` training pairs (the training split is shuffled: its first rows), the ids are
made in batches on every core, and the teacher's alignments cover the same sample. The log's last line says where
the time went."""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch
from datasets import Dataset, DatasetDict, Features, Sequence, Value, concatenate_datasets, load_from_disk
from filelock import FileLock

from data.atomic_file import atomic_file, os_cause
from data.fragments import short_pairs
from data.ibm2 import guide
from data.in_processes import frozen_heap
from data.readers import ParseReport
from data.sampler import IdLists
from data.splits import column, split_pairs
from data.tokenizer import TranslationTokenizer, tokenizer_fingerprint

log = logging.getLogger(__name__)


# Preparing holds about this many bytes per byte of corpus text at its peak, beside what the imports hold: 10M
# pairs, 1.35 GB of TSV, peaked at 8.0 GB with its tokenizing workers (docs/results.md, "A corpus of millions").
MEMORY_PER_CORPUS_BYTE, MEMORY_BESIDE = 6, 1.0e9


class DataCacheError(OSError):
    """The data cache could not be written (a full disk, a read-only folder, too little memory): nothing half-built
    is kept."""


def check_memory(corpus_bytes: int, available: int | None = None) -> None:
    """Refuse, in one line and before any work, a corpus of ``corpus_bytes`` whose preparation would need more memory
    than the machine has ``available`` (read from /proc/meminfo where there is one): never an OOM kill midway."""
    available = available if available is not None else available_memory()
    needed = MEMORY_BESIDE + MEMORY_PER_CORPUS_BYTE * corpus_bytes
    if available is not None and needed > available:
        raise DataCacheError(errno.ENOMEM, f"preparing {corpus_bytes / 1e9:.1f} GB of corpus text needs about "
                                           f"{needed / 1e9:.1f} GB of memory and {available / 1e9:.1f} GB are free: "
                                           f"set data.limit_pairs (a seeded sample), or prepare it once on a larger "
                                           f"machine (the cache folder is then reused)")


def available_memory() -> int | None:
    """Bytes of memory free for a new process (Linux's MemAvailable), or None where it cannot be read."""
    try:
        found = re.search(r"^MemAvailable:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) * 1024 if found else None


def prepare_cache(folder: Path, read: Callable[[], tuple[pa.Table, ParseReport]], settings: Mapping) -> None:
    """Build what ``folder`` misses, reading the corpus (``read``) only if the splits are missing; ``settings``
    are the data module's (fractions, seed, BPE, ``tokenizer_from``). A write that fails (a full disk) is one
    ``DataCacheError`` naming the folder and the cause, with nothing half-built kept."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        remove_partial(folder)
        try:
            _build(folder, read, settings)
        except Exception as error:  # noqa: BLE001 — datasets and pyarrow wrap the OS error in their own
            cause = os_cause(error)
            if cause is None:
                raise
            remove_partial(folder)
            raise DataCacheError(cause.errno, f"{folder}: cannot build the data cache "
                                              f"({cause.strerror or cause}); nothing half-built is kept") from None


def remove_partial(folder: Path) -> None:
    """What a killed or failed build leaves: temporary files and half-written folders."""
    for stale in folder.glob("tmp*"):
        stale.unlink(missing_ok=True)
    for partial in (folder / "splits.partial", folder / "tokenizer.partial"):
        shutil.rmtree(partial, ignore_errors=True)


def _build(folder: Path, read: Callable[[], tuple[pa.Table, ParseReport]], settings: Mapping) -> None:
    """Splits (reading the corpus when they are missing), tokenizer, token ids and the alignments a run with an
    aligned head needs, into ``folder``; one log line of the time each stage took."""
    clock = StageClock()
    if not (folder / "splits" / "dataset_dict.json").is_file():
        pairs, report = read()
        clock.lap("read")
        splits = split_pairs(pairs, settings["val_fraction"], settings["test_fraction"], settings["seed"],
                             settings.get("max_eval_pairs"))
        del pairs
        if settings.get("short_text"):  # phrase pairs of the training split learned beside it
            splits["train"] = with_short_text(splits["train"], settings["short_text"], settings["seed"])
        splits.save_to_disk(str(folder / "splits.partial"))  # (none left: ``remove_partial`` ran under the lock)
        (folder / "report.json").write_text(json.dumps(report.__dict__, ensure_ascii=False))
        (folder / "splits.partial").rename(folder / "splits")
        clock.lap("split")
    splits = load_from_disk(str(folder / "splits"))
    learned = len(splits["train"]) if settings.get("learn_pairs") is None else settings["learn_pairs"]
    sample = splits["train"].select(range(min(len(splits["train"]), learned)))  # (shuffled: a seeded sample)
    tokenizer_dir = folder / "tokenizer"
    if not tokenizer_dir.is_dir() or not list(tokenizer_dir.glob("tokenizer*.json")):
        shutil.rmtree(tokenizer_dir, ignore_errors=True)
        if settings.get("tokenizer_from"):  # a trained run's: its ids are the ones its weights know
            tokenizer = TranslationTokenizer.load(settings["tokenizer_from"])
        else:
            # BPE never sees validation or test text; a sample of the training split is enough for the pieces
            tokenizer = TranslationTokenizer.train(zip(column(sample, "src"), column(sample, "tgt")),
                                                   settings["vocab_size"], settings["joint_vocab"],
                                                   settings["split_digits"], settings["copy_slots"])
        tokenizer.save(folder / "tokenizer.partial")
        (folder / "tokenizer.partial").rename(tokenizer_dir)
        clock.lap("tokenizer")
    splits = tokenized_splits(splits, TranslationTokenizer.load(tokenizer_dir), folder)
    clock.lap("ids")
    for side in ("src_ids", "tgt_ids"):
        write_end_to_end(splits["train"], side, end_to_end_file(folder, side))
    clock.lap("end to end")
    if settings.get("word_alignments") and not alignments_file(folder).is_file():
        sample = splits["train"].select(range(len(sample)))
        pairs = [(source[:-1], target) for source, target in zip(column(sample, "src_ids"), column(sample, "tgt_ids"))]
        aligned = guide(pairs)  # (no EOS)
        with atomic_file(alignments_file(folder), "wb") as out:  # flat positions and each pair's length
            torch.save({"positions": torch.tensor([i for links in aligned for i in links], dtype=torch.int16),
                        "lengths": torch.tensor([len(links) for links in aligned], dtype=torch.int32)}, out)
        clock.lap("alignments")
    if {"split", "tokenizer"} & set(clock.laps):  # (a cache already built: nothing to say)
        log.info("data prepared in %s", clock)


class StageClock:
    """The seconds each stage of a build took, said in one line: "12.0 s (read 3.1 s, split 0.8 s, ...)"."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps[stage], self.last = now - self.last, now

    def __str__(self) -> str:
        return f"{self.last - self.start:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in self.laps.items()) + ")"


def with_short_text(train: Dataset, share: float, seed: int) -> Dataset:
    """``train`` and phrase pairs cut from ``share`` of its pairs (``data/fragments.py``), added at its end."""
    found = short_pairs(column(train, "src"), column(train, "tgt"), share, seed)
    log.info("short text: %d phrase pairs of the training split added to it (data.short_text=%s)", len(found), share)
    short = Dataset.from_dict({"src": [s for s, _ in found], "tgt": [t for _, t in found]}, features=train.features)
    return concatenate_datasets([train, short])


def end_to_end_file(folder: Path, side: str) -> Path:
    """Where the training split's ``side`` ids lie end to end (int32), the lengths beside them (``.lengths.npy``)."""
    return folder / f"train-{side}-{tokenizer_fingerprint(folder / 'tokenizer')[:16]}.int32"


def write_end_to_end(split: Dataset, side: str, path: Path, rows_at_once: int = 100_000) -> None:
    """``split``'s id lists of ``side`` end to end in one file that training memory-maps (a Dataset's lists lie in
    many Arrow batches, which one tensor could only hold as a copy), written ``rows_at_once`` at a time."""
    lengths_path = path.with_suffix(".lengths.npy")
    if path.is_file() and lengths_path.is_file():
        return
    lengths = []
    with atomic_file(path, "wb") as out:
        for batch in split.with_format("arrow").iter(batch_size=rows_at_once):
            lists = batch[side].combine_chunks()
            lists.flatten().to_numpy(zero_copy_only=False).astype(np.int32).tofile(out)
            lengths.append(np.diff(lists.offsets.to_numpy()))
    with atomic_file(lengths_path, "wb") as out:
        np.save(out, np.concatenate(lengths or [np.zeros(0, np.int64)]).astype(np.int64))


def read_end_to_end(folder: Path, side: str) -> IdLists:
    """The training split's ``side`` ids, memory-mapped: pages are read as batches need them, and shared."""
    path = end_to_end_file(folder, side)
    lengths = torch.from_numpy(np.load(path.with_suffix(".lengths.npy")))
    flat = np.memmap(path, dtype=np.int32, mode="r") if path.stat().st_size else np.zeros(1, np.int32)
    with warnings.catch_warnings():  # read-only memory: the ids are never written through it
        warnings.filterwarnings("ignore", "The given NumPy array is not writable")
        return IdLists(torch.from_numpy(flat), torch.cumsum(lengths, 0) - lengths, lengths)


def alignments_file(folder: Path) -> Path:
    return folder / f"alignments-train-{tokenizer_fingerprint(folder / 'tokenizer')[:16]}.pt"


def read_alignments(folder: Path, pairs: int) -> IdLists:
    """The training pairs' alignments: for each target token, the source position it is aligned to (-1: none);
    the ``pairs`` past the teacher's sample get none (every target token -1)."""
    saved = torch.load(alignments_file(folder), weights_only=True)
    lengths = torch.cat([saved["lengths"].long(), torch.zeros(pairs - len(saved["lengths"]), dtype=torch.long)])
    flat = saved["positions"].int() if len(saved["positions"]) else torch.zeros(1, dtype=torch.int32)
    return IdLists(flat, torch.cumsum(lengths, 0) - lengths, lengths)


def read_report(folder: Path) -> ParseReport:
    """How the cached corpus was read (``report.json``)."""
    return ParseReport(**json.loads((folder / "report.json").read_text()))


def tokenized_splits(splits: DatasetDict, tokenizer: TranslationTokenizer, folder: Path) -> DatasetDict:
    """Token ids for every split via ``Dataset.map(batched=True)``, cached in ``folder``.

    The cache files are named after the tokenizer's fingerprint, so ids made by another
    tokenizer are never reused; an unreadable cache file is deleted and rebuilt.
    """
    fingerprint = tokenizer_fingerprint(folder / "tokenizer")[:16]
    ids = Sequence(Value("int32"))  # (half of int64's disk and memory)

    tokenizer = tokenizer.for_nfc_text()  # (the readers wrote the splits in NFC)

    def encode(batch: dict, training: bool) -> dict:
        src_ids, tgt_ids = tokenizer.encode_pairs(batch["src"], batch["tgt"], training)
        return {"src_ids": src_ids, "tgt_ids": tgt_ids}

    def tokenized(name: str, split):
        cache_file = folder / f"tokenized-{name}-{fingerprint}.arrow"
        # Copy slots and casing are Python: a process per core on a large split (each with its own tokenizer)
        processes = min(os.cpu_count() or 1, len(split) // 50_000) or None
        for attempt in (1, 2):
            try:
                return split.map(encode, fn_kwargs={"training": name == "train"}, batched=True, batch_size=2000,
                                 cache_file_name=str(cache_file), desc=f"tokenizing {name}", num_proc=processes,
                                 features=Features({**split.features, "src_ids": ids, "tgt_ids": ids}),
                                 new_fingerprint=f"{folder.name}-{name}-{fingerprint}")
            except Exception as error:  # noqa: BLE001 — a damaged cache file: rebuild it once
                if attempt == 2 or not cache_file.exists():
                    raise
                log.warning("%s is unreadable (%s): rebuilding it", cache_file, type(error).__name__)
                cache_file.unlink()

    with frozen_heap():
        return DatasetDict({name: tokenized(name, split) for name, split in splits.items()})
