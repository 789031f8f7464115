"""The LightningDataModule: corpus -> leak-free splits -> BPE -> cached token ids (``data/cache.py``) -> batches,
from a ``DataLoader`` on the host or cut on the device (``data/device_batches.py``). A fine-tuned run also reads
its starting run's corpus (``original``): mixed into training, ``replay`` per new pair, and evaluated beside it."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path

import lightning as L
import numpy as np
import pyarrow as pa
import torch
from datasets import DatasetDict, load_from_disk
from torch.utils.data import DataLoader

from data.cache import (check_memory, prepare_cache, read_alignments, read_end_to_end, read_report,
                        tokenized_splits)
from data.coverage import coverage_line
from data.corpus import DEFAULT_CACHE, CorpusError, corpus_files, locate_corpus
from data.corpus_text import text_size
from data.data_settings import CORPUS_KEYS, data_problems
from data.languages import LanguagePair
from data.readers import ParseReport, hub_pairs, stream_pairs
from data.device_batches import DeviceBatches
from data.sampler import Collator, IdLists, TokenBucketBatchSampler
from data.splits import column, pair_table, word_pattern
from data.tokenizer import TranslationTokenizer, tokenizer_fingerprint, truncate_source

log = logging.getLogger(__name__)
CACHE_VERSION = 6  # bump when the cached format (or what copy slots hold) changes
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
        corpus_format: str = "auto",
        columns: list[str] | None = None,
        encoding: str | None = None,
        strict: bool = False,
        cache_dir: str | None = None,
        download: bool = True,
        val_fraction: float = 0.02,
        test_fraction: float = 0.02,
        max_eval_pairs: int | None = 3000,
        seed: int = 1234,
        vocab_size: int = 8000,
        joint_vocab: bool = True,
        split_digits: bool = False,
        copy_slots: bool = True,
        max_tokens: int = 4096,
        max_sentence_len: int = 128,
        limit_pairs: int | None = None,
        learn_pairs: int | None = 200_000,
        word_alignments: bool = False,
        exclude_words: list[str] | None = None,
        short_text: float = 0.0,
        tokenizer_from: str | None = None,
        original: Mapping | None = None,
        replay: float = 0.0,
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
        self.original: TranslationDataModule | None = None  # a fine-tune's starting corpus (setup)

    # -- building the cache -------------------------------------------------------------
    def _source_description(self) -> dict:
        hp = self.hparams
        if hp.hub_path:
            return {"hub": hp.hub_path, "name": hp.hub_name, "split": hp.hub_split}
        files = corpus_files(self._corpus(), self.pair)
        return {"corpus": [str(f.resolve()) for f in files], "size": [f.stat().st_size for f in files],
                "mtime": [f.stat().st_mtime_ns for f in files],
                "read": [hp.corpus_format, list(hp.columns or []), hp.encoding, hp.strict]}

    def _corpus(self) -> Path:
        return locate_corpus(self.hparams.corpus_path, self.cache_dir, download=self.hparams.download, pair=self.pair)

    def settings_folder(self) -> Path:
        """This data's folder in the cache: named by a hash of the source and every setting that shapes it."""
        hp = self.hparams
        settings = {
            "source": self._source_description(),
            "pair": [self.pair.source, self.pair.target],
            "split": [hp.val_fraction, hp.test_fraction, hp.max_eval_pairs, hp.seed, hp.limit_pairs,
                      list(hp.exclude_words or [])],
            "bpe": ([tokenizer_fingerprint(hp.tokenizer_from)] if hp.tokenizer_from
                    else [hp.vocab_size, hp.joint_vocab, hp.split_digits, hp.copy_slots, hp.learn_pairs]),
            "version": CACHE_VERSION,
            # Without it, the folders it always had; 2: the phrase pairs' forms (each ended in a stop).
            **({"short_text": [hp.short_text, 2]} if hp.short_text else {}),
        }
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
        return self.cache_dir / digest

    def _read_pairs(self) -> tuple[pa.Table, ParseReport]:
        """The corpus's pairs as an Arrow table, read as a stream (``data/readers.py``), less a left-out topic."""
        hp = self.hparams
        if hp.hub_path:
            pairs, report = hub_pairs(hp.hub_path, hp.hub_name, hp.hub_split, self.pair)
        else:
            check_memory(sum(text_size(f) for f in corpus_files(self._corpus(), self.pair)))
            pairs, report = stream_pairs(self._corpus(), self.pair, hp.corpus_format, hp.columns, hp.encoding,
                                         hp.strict)
        if hp.exclude_words:  # a topic kept out of this run (to fine-tune on later)
            topic = word_pattern(hp.exclude_words)
            pairs = (pair for pair in pairs if not (topic.search(pair[0]) or topic.search(pair[1])))
        table = pair_table(pairs)
        if hp.exclude_words:
            log.info("left out %d pairs that mention %s (data.exclude_words)", report.kept - table.num_rows,
                     ", ".join(hp.exclude_words))
        if hp.limit_pairs:  # a seeded sample, for quick runs
            generator = torch.Generator().manual_seed(hp.seed)
            keep = torch.randperm(table.num_rows, generator=generator)[: hp.limit_pairs].sort().values
            table = table.take(keep.numpy())
        return table, report

    def prepare_data(self) -> None:
        """Build what is missing from the cache (``data/cache.py``: one process at a time, nothing half-built kept)."""
        prepare_cache(self.settings_folder(), self._read_pairs, self.hparams)

    # -- loading ------------------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        if self.splits is not None:
            return
        self.prepare_data()  # a no-op when the cache is complete
        folder = self.settings_folder()
        self.report = read_report(folder)
        log.info("corpus: %s; %s", self.report.reading, self.report.summary())
        self.tokenizer = TranslationTokenizer.load(folder / "tokenizer")
        self.splits = tokenized_splits(load_from_disk(str(folder / "splits")), self.tokenizer, folder)
        # Each split's ids end to end in one tensor: a Python list per pair would cost ten million objects on a large
        # corpus. The training split's are memory-mapped from the cache; the others (a few thousand rows) read.
        self._ids = {name: tuple(read_end_to_end(folder, side) if name == "train" else
                                 IdLists.of_arrow(split.with_format("arrow")[side]) for side in ("src_ids", "tgt_ids"))
                     for name, split in self.splits.items()}
        src_ids, tgt_ids = self._ids["train"]
        # The training pairs' alignments guide an aligned attention head (read only for one)
        self._alignments = read_alignments(folder, len(src_ids)) if self.hparams.word_alignments else None
        limit = self.hparams.max_sentence_len
        self._train_rows = np.flatnonzero((src_ids.lengths <= limit).numpy() & (tgt_ids.lengths < limit).numpy())
        if len(self._train_rows) < len(src_ids):
            log.warning("skipped %d training pairs longer than max_sentence_len=%d tokens",
                        len(src_ids) - len(self._train_rows), limit)
        if self.hparams.original is not None:
            self._add_original()

    def _add_original(self) -> None:
        """The starting run's corpus, through this run's tokenizer. Training: all its pairs, fresh ones each step,
        ``replay`` of them per new pair seen (the new pairs are repeated to that ratio: a small corpus would
        otherwise be a drop in the original). Its validation and test splits are evaluated beside these."""
        hp = self.hparams
        self.original = TranslationDataModule(**{k: v for k, v in hp.original.items() if k in CORPUS_KEYS},
                                              cache_dir=str(self.cache_dir), download=hp.download,
                                              tokenizer_from=hp.tokenizer_from, max_sentence_len=hp.max_sentence_len,
                                              word_alignments=hp.word_alignments)
        self.original.setup()
        log.info(coverage_line(*({"src": m.sources("train"), "tgt": column(m.splits["train"], "tgt"),
                                  "src_ids": m._ids["train"][0].lists(), "tgt_ids": m._ids["train"][1].lists()}
                                 for m in (self, self.original))))
        for split in ("validation", "test"):
            self.splits[f"{split}_original"] = self.original.splits[split]
            self._ids[f"{split}_original"] = self.original._ids[split]
        if hp.replay == 0:
            return
        (src_ids, tgt_ids), (original_src, original_tgt) = self._ids["train"], self.original._ids["train"]
        new_rows, original_rows = self._train_rows, self.original._train_rows
        if not len(new_rows):
            raise CorpusError(f"the new corpus has no training pair within data.max_sentence_len={hp.max_sentence_len} "
                              f"tokens: nothing to fine-tune on")
        repeats = max(1, round(len(original_rows) / (hp.replay * len(new_rows))))
        if len(original_rows) < 0.9 * hp.replay * len(new_rows):  # the new pairs cannot be seen fewer than once
            log.warning("data.replay=%s asks for %g original pairs per new one, but the original corpus has %d for "
                        "the %d new training pairs: %.2f each (raise data.original.limit_pairs for more)", hp.replay,
                        hp.replay, len(original_rows), len(new_rows), len(original_rows) / len(new_rows))
        self._ids["train"] = (src_ids + original_src, tgt_ids + original_tgt)
        if self._alignments is not None:
            self._alignments = self._alignments + self.original._alignments
        self._train_rows = np.concatenate([np.tile(new_rows, repeats), len(src_ids) + original_rows])
        log.info("fine-tuning data: %d new training pairs, each seen %d times per pass over the %d of the original "
                 "corpus (data.replay=%s)", len(new_rows), repeats, len(original_rows), hp.replay)

    def evaluation_splits(self, stage: str) -> list[str]:
        """The splits a stage (``validation``, ``test``) evaluates, one dataloader each: this corpus's, then the
        original's (``test_original``) for a fine-tuned run."""
        return [stage, f"{stage}_original"] if self.original is not None else [stage]

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
        if rows is None:  # evaluation (a few thousand rows) keeps every row; over-long sources are truncated (EOS kept)
            src_ids = IdLists.of([truncate_source(s, limit) for s in src_ids.lists()])
            tgt_ids = IdLists.of([t[: limit - 1] for t in tgt_ids.lists()])
            rows = np.arange(len(src_ids))
        # A pair's cost in the budget: its longer side (the target gains BOS / EOS).
        lengths = torch.maximum(src_ids.lengths, tgt_ids.lengths + 1)[rows].numpy()
        trainer = self.trainer
        sampler = TokenBucketBatchSampler(
            lengths, self.hparams.max_tokens, shuffle=shuffle, seed=self.hparams.seed,
            num_replicas=trainer.world_size if trainer else 1, rank=trainer.global_rank if trainer else 0,
        )
        alignments = self._alignments if split == "train" else None  # (teacher forcing's guide: training only)
        device = trainer.strategy.root_device if self.hparams.on_device and trainer else "cpu"  # where the ids live
        collate = Collator(src_ids, tgt_ids, **self.special_ids, alignments=alignments, device=device)
        if self.hparams.on_device:  # each batch is cut out on the device
            return DeviceBatches(collate, rows, sampler)
        # The sampler yields positions in ``rows``; the loader turns them into row indices.
        workers = self.hparams.num_workers
        # pin_memory: page-locked batches copy to a GPU asynchronously; persistent workers skip a
        # restart at every epoch and validation.
        return DataLoader(rows, batch_sampler=sampler, collate_fn=collate, num_workers=workers,
                          pin_memory=self.hparams.pin_memory, persistent_workers=workers > 0)

    def train_dataloader(self) -> DataLoader | DeviceBatches:
        return self._loader("train", shuffle=True, rows=self._train_rows)

    def _evaluation_loaders(self, stage: str) -> DataLoader | DeviceBatches | list[DataLoader | DeviceBatches]:
        loaders = [self._loader(split, shuffle=False) for split in self.evaluation_splits(stage)]
        return loaders if len(loaders) > 1 else loaders[0]

    def val_dataloader(self) -> DataLoader | DeviceBatches | list[DataLoader | DeviceBatches]:
        return self._evaluation_loaders("validation")

    def test_dataloader(self) -> DataLoader | DeviceBatches | list[DataLoader | DeviceBatches]:
        return self._evaluation_loaders("test")
