"""The LightningDataModule: corpus -> leak-free splits -> BPE -> cached token ids -> batches.

Everything derived from the corpus is cached under ``cache_dir/<settings hash>/``:
the splits (``save_to_disk``), the tokenizer and the tokenized splits (``Dataset.map``
cache files), so a second run with the same settings reads them instead of rebuilding.
Batches come from a ``DataLoader`` on the host, or, on a GPU, are cut on the device from
token ids copied there once (``data/device_batches.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path

import lightning as L
import torch
from datasets import DatasetDict, load_from_disk
from filelock import FileLock
from torch.utils.data import DataLoader

from data.atomic_file import os_cause
from data.corpus import DEFAULT_CACHE, corpus_files, locate_corpus
from data.languages import LanguagePair, pair_problems
from data.readers import ParseReport, hub_pairs, read_pairs
from data.device_batches import DeviceBatches
from data.sampler import Collator, TokenBucketBatchSampler
from data.splits import column, split_pairs
from data.tokenizer import MIN_VOCAB_SIZE, TranslationTokenizer, tokenizer_fingerprint, truncate_source

log = logging.getLogger(__name__)
CACHE_VERSION = 3  # bump when the cached format (or what copy slots hold) changes


class DataCacheError(OSError):
    """The data cache could not be written (a full disk, a read-only folder): nothing half-built is kept."""


def data_problems(settings: Mapping, prefix: str = "") -> list[str]:
    """What ``TranslationDataModule`` refuses among ``settings`` (its arguments), one phrase each, keys
    written with ``prefix`` (``data.`` in train.py's check of a whole config)."""
    problems = pair_problems(settings.get("source_lang", "en"), settings.get("target_lang", "es"), prefix)
    for key in ("vocab_size", "max_tokens", "max_sentence_len"):
        value = settings.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{prefix}{key}={value!r} must be a whole number >= 1")
    vocab_size = settings.get("vocab_size", MIN_VOCAB_SIZE)
    if not problems and vocab_size < MIN_VOCAB_SIZE:
        problems.append(f"{prefix}vocab_size={vocab_size} is below {MIN_VOCAB_SIZE} (the 256 byte symbols of "
                        f"byte-level BPE and the special tokens)")
    limit = settings.get("limit_pairs")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        problems.append(f"{prefix}limit_pairs={limit!r} must be a whole number >= 1, or null for every pair")
    for key in ("val_fraction", "test_fraction"):
        share = settings.get(key, 0.02)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 0.5:
            problems.append(f"{prefix}{key}={share!r} must be a share between 0 and 0.5")
    if not problems and settings.get("max_tokens", 4096) <= settings.get("max_sentence_len", 128):
        problems.append(f"{prefix}max_tokens={settings.get('max_tokens', 4096)} cannot hold one pair of "
                        f"{prefix}max_sentence_len={settings.get('max_sentence_len', 128)} tokens")
    on_device = settings.get("on_device", False)
    if on_device not in (True, False):  # configs' "auto" is settled by the run machinery (runtime/machine.py)
        problems.append(f"{prefix}on_device={on_device!r} must be true or false")
    return problems


class TranslationDataModule(L.LightningDataModule):
    """One language pair's data (English→Spanish by default) for training, validation (multi-reference) and test."""

    def __init__(
        self,
        corpus_path: str | None = None,
        source_lang: str = "en",
        target_lang: str = "es",
        hub_path: str | None = None,
        hub_name: str | None = None,
        hub_split: str = "train",
        cache_dir: str | None = None,
        download: bool = True,
        val_fraction: float = 0.02,
        test_fraction: float = 0.02,
        seed: int = 1234,
        vocab_size: int = 8000,
        joint_vocab: bool = True,
        split_digits: bool = False,
        copy_slots: bool = True,
        max_tokens: int = 4096,
        max_sentence_len: int = 128,
        limit_pairs: int | None = None,
        num_workers: int = 0,
        pin_memory: bool = False,
        on_device: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)
        if problems := data_problems(self.hparams):
            raise ValueError("; ".join(problems))
        self.cache_dir = Path(cache_dir or DEFAULT_CACHE).expanduser()  # the setting, as a path
        self.pair = LanguagePair(source_lang, target_lang)
        self.tokenizer: TranslationTokenizer | None = None
        self.splits: DatasetDict | None = None
        self.report: ParseReport | None = None

    # -- building the cache -------------------------------------------------------------
    def _source_description(self) -> dict:
        hp = self.hparams
        if hp.hub_path:
            return {"hub": hp.hub_path, "name": hp.hub_name, "split": hp.hub_split}
        files = corpus_files(self._corpus(), self.pair)
        return {"corpus": [str(f.resolve()) for f in files], "size": [f.stat().st_size for f in files],
                "mtime": [f.stat().st_mtime_ns for f in files]}

    def _corpus(self) -> Path:
        return locate_corpus(self.hparams.corpus_path, self.cache_dir, download=self.hparams.download, pair=self.pair)

    def settings_folder(self) -> Path:
        """This data's folder in the cache: named by a hash of the source and every setting that shapes it."""
        hp = self.hparams
        settings = {
            "source": self._source_description(),
            "pair": [self.pair.source, self.pair.target],
            "split": [hp.val_fraction, hp.test_fraction, hp.seed, hp.limit_pairs],
            "bpe": [hp.vocab_size, hp.joint_vocab, hp.split_digits, hp.copy_slots],
            "version": CACHE_VERSION,
        }
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
        return self.cache_dir / digest

    def _read_pairs(self) -> tuple[list[tuple[str, str]], ParseReport]:
        hp = self.hparams
        if hp.hub_path:
            pairs, report = hub_pairs(hp.hub_path, hp.hub_name, hp.hub_split, self.pair)
        else:
            pairs, report = read_pairs(self._corpus(), self.pair)
        if hp.limit_pairs:  # a seeded sample, for quick runs
            generator = torch.Generator().manual_seed(hp.seed)
            keep = sorted(torch.randperm(len(pairs), generator=generator)[: hp.limit_pairs].tolist())
            pairs = [pairs[i] for i in keep]
        return pairs, report

    def prepare_data(self) -> None:
        """Build what is missing from the cache (one process at a time, under a file lock).

        A write that fails (a full disk) is one ``DataCacheError`` naming the folder and the cause,
        with nothing half-built kept; what a killed build left is removed here the next time.
        """
        folder = self.settings_folder()
        folder.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder) + ".lock"):
            self._remove_partial(folder)
            pairs_and_report = None if (folder / "splits" / "dataset_dict.json").is_file() else self._read_pairs()
            try:
                self._build(folder, pairs_and_report)
            except Exception as error:  # noqa: BLE001 — datasets and pyarrow wrap the OS error in their own
                cause = os_cause(error)
                if cause is None:
                    raise
                self._remove_partial(folder)
                raise DataCacheError(cause.errno, f"{folder}: cannot build the data cache "
                                                  f"({cause.strerror or cause}); nothing half-built is kept") from None

    @staticmethod
    def _remove_partial(folder: Path) -> None:
        """What a killed or failed build leaves: temporary files and half-written folders."""
        for stale in folder.glob("tmp*"):
            stale.unlink(missing_ok=True)
        for partial in (folder / "splits.partial", folder / "tokenizer.partial"):
            shutil.rmtree(partial, ignore_errors=True)

    def _build(self, folder: Path, pairs_and_report: tuple | None) -> None:
        """Splits (from ``pairs_and_report`` when they are missing), tokenizer and token ids, into ``folder``."""
        if pairs_and_report is not None:
            pairs, report = pairs_and_report
            partial = folder / "splits.partial"
            shutil.rmtree(partial, ignore_errors=True)
            splits = split_pairs(pairs, self.hparams.val_fraction, self.hparams.test_fraction, self.hparams.seed)
            splits.save_to_disk(str(partial))
            (folder / "report.json").write_text(json.dumps(report.__dict__ | {"skipped": report.skipped}))
            partial.rename(folder / "splits")
        splits = load_from_disk(str(folder / "splits"))
        tokenizer_dir = folder / "tokenizer"
        if not tokenizer_dir.is_dir() or not list(tokenizer_dir.glob("tokenizer*.json")):
            shutil.rmtree(tokenizer_dir, ignore_errors=True)
            train = splits["train"]  # BPE never sees validation or test text
            tokenizer = TranslationTokenizer.train(zip(train["src"], train["tgt"]), self.hparams.vocab_size,
                                                   self.hparams.joint_vocab, self.hparams.split_digits,
                                                   self.hparams.copy_slots)
            shutil.rmtree(folder / "tokenizer.partial", ignore_errors=True)
            tokenizer.save(folder / "tokenizer.partial")
            (folder / "tokenizer.partial").rename(tokenizer_dir)
        self._tokenize(splits, TranslationTokenizer.load(tokenizer_dir), folder)

    def _tokenize(self, splits: DatasetDict, tokenizer: TranslationTokenizer, folder: Path) -> DatasetDict:
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

    # -- loading ------------------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        if self.splits is not None:
            return
        self.prepare_data()  # a no-op when the cache is complete
        folder = self.settings_folder()
        self.report = ParseReport(**{k: v for k, v in json.loads((folder / "report.json").read_text()).items()
                                     if k != "skipped"})
        self.tokenizer = TranslationTokenizer.load(folder / "tokenizer")
        self.splits = self._tokenize(load_from_disk(str(folder / "splits")), self.tokenizer, folder)
        # Plain lists, read once: a Dataset column is a lazy view (datasets >= 4), and reading one row
        # of it costs an Arrow lookup; every batch and every length would pay it again and again.
        self._ids = {name: (column(split, "src_ids"), column(split, "tgt_ids")) for name, split in self.splits.items()}
        limit = self.hparams.max_sentence_len
        src_ids, tgt_ids = self._ids["train"]
        self._train_rows = [i for i, (s, t) in enumerate(zip(src_ids, tgt_ids)) if len(s) <= limit and len(t) < limit]
        if len(self._train_rows) < len(src_ids):
            log.warning("skipped %d training pairs longer than max_sentence_len=%d tokens",
                        len(src_ids) - len(self._train_rows), limit)

    @property
    def tokenizer_folder(self) -> Path:
        """Where the tokenizer of these settings is cached."""
        return self.settings_folder() / "tokenizer"

    @property
    def src_vocab_size(self) -> int:
        return self.tokenizer.src_vocab_size

    @property
    def tgt_vocab_size(self) -> int:
        return self.tokenizer.tgt_vocab_size

    @property
    def special_ids(self) -> dict[str, int]:
        t = self.tokenizer
        return {"pad_id": t.pad_id, "bos_id": t.bos_id, "eos_id": t.eos_id}

    def references(self, split: str) -> list[list[str]]:
        """All translations of each row of ``split`` (row order = batch ``index``)."""
        return column(self.splits[split], "refs")

    def sources(self, split: str) -> list[str]:
        return column(self.splits[split], "src")

    def _loader(self, split: str, shuffle: bool, rows: list[int] | None = None) -> DataLoader | DeviceBatches:
        src_ids, tgt_ids = self._ids[split]
        limit = self.hparams.max_sentence_len
        if rows is None:  # evaluation keeps every row; over-long sources are truncated (EOS kept)
            src_ids = [truncate_source(s, limit) for s in src_ids]
            tgt_ids = [t[: limit - 1] for t in tgt_ids]
            rows = list(range(len(src_ids)))
        # A pair's cost in the budget: its longer side (the target gains BOS / EOS).
        lengths = [max(len(src_ids[i]), len(tgt_ids[i]) + 1) for i in rows]
        trainer = self.trainer
        sampler = TokenBucketBatchSampler(
            lengths, self.hparams.max_tokens, shuffle=shuffle, seed=self.hparams.seed,
            num_replicas=trainer.world_size if trainer else 1, rank=trainer.global_rank if trainer else 0,
        )
        if self.hparams.on_device:  # the ids live on the training device; each batch is cut out there
            device = trainer.strategy.root_device if trainer else torch.device("cpu")
            return DeviceBatches(src_ids, tgt_ids, rows, sampler, device=device, **self.special_ids)
        # The sampler yields positions in ``rows``; the loader turns them into row indices.
        collate = Collator(src_ids, tgt_ids, **self.special_ids)
        workers = self.hparams.num_workers
        # pin_memory: page-locked batches copy to a GPU asynchronously; persistent workers skip a
        # restart at every epoch and validation.
        return DataLoader(rows, batch_sampler=sampler, collate_fn=collate, num_workers=workers,
                          pin_memory=self.hparams.pin_memory, persistent_workers=workers > 0)

    def train_dataloader(self) -> DataLoader | DeviceBatches:
        return self._loader("train", shuffle=True, rows=self._train_rows)

    def val_dataloader(self) -> DataLoader | DeviceBatches:
        return self._loader("validation", shuffle=False)

    def test_dataloader(self) -> DataLoader | DeviceBatches:
        return self._loader("test", shuffle=False)
