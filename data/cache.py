"""The data cache: a corpus's splits, its tokenizer and its token ids in one folder per settings, built once.

``<cache_dir>/<settings hash>/`` holds ``splits/`` (``save_to_disk``), ``report.json`` (how the corpus was read),
``tokenizer/`` (trained on the training split, or a trained run's, copied) and ``tokenized-*.arrow``
(``Dataset.map`` cache files named after the tokenizer's fingerprint). One process builds at a time (a file
lock); a build killed or failed midway leaves nothing that a later one would take for finished.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from datasets import DatasetDict, load_from_disk
from filelock import FileLock

from data.atomic_file import os_cause
from data.readers import Pairs, ParseReport
from data.splits import split_pairs
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
        partial = folder / "splits.partial"
        shutil.rmtree(partial, ignore_errors=True)
        splits = split_pairs(pairs, settings["val_fraction"], settings["test_fraction"], settings["seed"])
        splits.save_to_disk(str(partial))
        (folder / "report.json").write_text(json.dumps(report.__dict__, ensure_ascii=False))
        partial.rename(folder / "splits")
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
        shutil.rmtree(folder / "tokenizer.partial", ignore_errors=True)
        tokenizer.save(folder / "tokenizer.partial")
        (folder / "tokenizer.partial").rename(tokenizer_dir)
    tokenized_splits(splits, TranslationTokenizer.load(tokenizer_dir), folder)


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
