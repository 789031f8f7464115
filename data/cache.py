"""The data cache: a corpus's splits, how it was read, its tokenizer, its token ids and the training pairs' token
alignments (``data/ibm2.py``) in one folder per settings, ``<cache_dir>/<settings hash>/``; built once, one process
at a time (a file lock), and a build killed or failed midway leaves nothing a later one would take for finished."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import torch
from datasets import Dataset, DatasetDict, concatenate_datasets, load_from_disk
from filelock import FileLock

from data.atomic_file import atomic_file, os_cause
from data.fragments import short_pairs
from data.ibm2 import guide
from data.readers import Pairs, ParseReport
from data.splits import column, split_pairs
from data.tokenizer import TranslationTokenizer, tokenizer_fingerprint

log = logging.getLogger(__name__)


class DataCacheError(OSError):
    """The data cache could not be written (a full disk, a read-only folder): nothing half-built is kept."""


def prepare_cache(folder: Path, read: Callable[[], tuple[Pairs, ParseReport]], settings: Mapping) -> None:
    """Build what ``folder`` misses, reading the corpus (``read``) only if the splits are missing; ``settings``
    are the data module's (fractions, seed, BPE, ``tokenizer_from``). A write that fails (a full disk) is one
    ``DataCacheError`` naming the folder and the cause, with nothing half-built kept."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        remove_partial(folder)
        pairs_and_report = None if (folder / "splits" / "dataset_dict.json").is_file() else read()
        try:
            _build(folder, pairs_and_report, settings)
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


def _build(folder: Path, pairs_and_report: tuple | None, settings: Mapping) -> None:
    """Splits (from ``pairs_and_report`` when they are missing), tokenizer and token ids, into ``folder``."""
    if pairs_and_report is not None:
        pairs, report = pairs_and_report
        splits = split_pairs(pairs, settings["val_fraction"], settings["test_fraction"], settings["seed"])
        if settings.get("short_text"):  # phrase pairs of the training split learned beside it
            splits["train"] = with_short_text(splits["train"], settings["short_text"], settings["seed"])
        splits.save_to_disk(str(folder / "splits.partial"))  # (none left: ``remove_partial`` ran under the lock)
        (folder / "report.json").write_text(json.dumps(report.__dict__, ensure_ascii=False))
        (folder / "splits.partial").rename(folder / "splits")
    splits = load_from_disk(str(folder / "splits"))
    tokenizer_dir = folder / "tokenizer"
    if not tokenizer_dir.is_dir() or not list(tokenizer_dir.glob("tokenizer*.json")):
        shutil.rmtree(tokenizer_dir, ignore_errors=True)
        if settings.get("tokenizer_from"):  # a trained run's: its ids are the ones its weights know
            tokenizer = TranslationTokenizer.load(settings["tokenizer_from"])
        else:
            train = splits["train"]  # BPE never sees validation or test text
            tokenizer = TranslationTokenizer.train(zip(train["src"], train["tgt"]), settings["vocab_size"],
                                                   settings["joint_vocab"], settings["split_digits"],
                                                   settings["copy_slots"])
        tokenizer.save(folder / "tokenizer.partial")
        (folder / "tokenizer.partial").rename(tokenizer_dir)
    train = tokenized_splits(splits, TranslationTokenizer.load(tokenizer_dir), folder)["train"]
    if not alignments_file(folder).is_file():
        pairs = [(source[:-1], target) for source, target in zip(train["src_ids"], train["tgt_ids"])]  # no EOS
        aligned = guide(pairs)
        with atomic_file(alignments_file(folder), "wb") as out:  # flat positions and each pair's length
            torch.save({"positions": torch.tensor([i for links in aligned for i in links], dtype=torch.int16),
                        "lengths": torch.tensor([len(links) for links in aligned], dtype=torch.int32)}, out)


def with_short_text(train: Dataset, share: float, seed: int) -> Dataset:
    """``train`` and phrase pairs cut from ``share`` of its pairs (``data/fragments.py``), added at its end."""
    found = short_pairs(column(train, "src"), column(train, "tgt"), share, seed)
    log.info("short text: %d phrase pairs of the training split added to it (data.short_text=%s)", len(found), share)
    short = Dataset.from_dict({"src": [s for s, _ in found], "tgt": [t for _, t in found],
                               "refs": [[t] for _, t in found]}, features=train.features)
    return concatenate_datasets([train, short])


def alignments_file(folder: Path) -> Path:
    return folder / f"alignments-train-{tokenizer_fingerprint(folder / 'tokenizer')[:16]}.pt"


def read_alignments(folder: Path) -> list[list[int]]:
    """The training pairs' alignments: for each target token, the source position it is aligned to (-1: none)."""
    saved = torch.load(alignments_file(folder), weights_only=True)
    return [links.tolist() for links in saved["positions"].split(saved["lengths"].tolist())]


def read_report(folder: Path) -> ParseReport:
    """How the cached corpus was read (``report.json``)."""
    return ParseReport(**json.loads((folder / "report.json").read_text()))


def tokenized_splits(splits: DatasetDict, tokenizer: TranslationTokenizer, folder: Path) -> DatasetDict:
    """Token ids for every split via ``Dataset.map(batched=True)``, cached in ``folder``.

    The cache files are named after the tokenizer's fingerprint, so ids made by another
    tokenizer are never reused; an unreadable cache file is deleted and rebuilt.
    """
    fingerprint = tokenizer_fingerprint(folder / "tokenizer")[:16]

    def encode(batch: dict, training: bool) -> dict:
        src_ids, tgt_ids = tokenizer.encode_pairs(batch["src"], batch["tgt"], training)
        return {"src_ids": src_ids, "tgt_ids": tgt_ids}

    def tokenized(name: str, split):
        cache_file = folder / f"tokenized-{name}-{fingerprint}.arrow"
        for attempt in (1, 2):
            try:
                return split.map(encode, fn_kwargs={"training": name == "train"}, batched=True, batch_size=2000,
                                 cache_file_name=str(cache_file), desc=f"tokenizing {name}",
                                 new_fingerprint=f"{folder.name}-{name}-{fingerprint}")
            except Exception as error:  # noqa: BLE001 — a damaged cache file: rebuild it once
                if attempt == 2 or not cache_file.exists():
                    raise
                log.warning("%s is unreadable (%s): rebuilding it", cache_file, type(error).__name__)
                cache_file.unlink()

    return DatasetDict({name: tokenized(name, split) for name, split in splits.items()})
