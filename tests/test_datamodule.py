"""data/datamodule.py: cache reuse, batches, vocabulary hand-off, and a hub-style dataset."""

import json

import torch

import data.datamodule as datamodule_module
from data.datamodule import TranslationDataModule
from helpers import small_corpus


def test_second_run_reuses_the_cache(tmp_path, monkeypatch):
    corpus = small_corpus(tmp_path)
    calls = {"tokenize": 0, "split": 0}
    original_split = datamodule_module.split_pairs
    original_encode = datamodule_module.TranslationTokenizer.encode_src

    def counting_split(*args, **kwargs):
        calls["split"] += 1
        return original_split(*args, **kwargs)

    def counting_encode(self, texts):
        calls["tokenize"] += 1
        return original_encode(self, texts)

    monkeypatch.setattr(datamodule_module, "split_pairs", counting_split)
    monkeypatch.setattr(datamodule_module.TranslationTokenizer, "encode_src", counting_encode)
    settings = dict(corpus_path=str(corpus), cache_dir=str(tmp_path / "cache"), vocab_size=300, max_tokens=512)
    cold = TranslationDataModule(**settings)
    cold.setup()
    cold_calls = dict(calls)
    assert cold_calls["split"] == 1 and cold_calls["tokenize"] >= 3  # one map per split

    warm = TranslationDataModule(**settings)
    warm.setup()
    assert calls == cold_calls  # nothing split or tokenized again: read from the cache files
    assert warm.splits["train"]["src_ids"] == cold.splits["train"]["src_ids"]
    assert warm.report.skipped_malformed == 1

    changed = TranslationDataModule(**(settings | {"vocab_size": 320}))
    assert changed.cache_dir() != cold.cache_dir()  # other settings, other cache


def test_batches_and_vocabulary(tmp_path):
    dm = TranslationDataModule(corpus_path=str(small_corpus(tmp_path)), cache_dir=str(tmp_path / "c"),
                               vocab_size=300, max_tokens=256, val_fraction=0.1, test_fraction=0.1)
    dm.setup()
    assert dm.src_vocab_size == dm.tgt_vocab_size == dm.tokenizer.src_vocab_size
    assert dm.special_ids == {"pad_id": 0, "bos_id": 1, "eos_id": 2}
    for batch in dm.train_dataloader():
        assert batch["src"].numel() <= 256 and batch["tgt_in"].numel() <= 256
        assert torch.all(batch["tgt_in"][:, 0] == 1)
        for tgt_in, tgt_out in zip(batch["tgt_in"], batch["tgt_out"]):
            n = int((tgt_out != 0).sum()) - 1  # target tokens before EOS
            assert torch.equal(tgt_in[1 : n + 1], tgt_out[:n])  # decoder input = output shifted right
        assert torch.all((batch["tgt_out"] == 2).sum(1) == 1)  # one EOS per target
    rows = [i for b in dm.val_dataloader() for i in b["index"].tolist()]
    assert sorted(rows) == list(range(len(dm.splits["validation"])))


def test_hub_dataset_through_the_same_pipeline(tmp_path):
    # A local stand-in with the layout of the hub's opus_books (a "translation" column).
    folder = tmp_path / "opus_books_standin"
    folder.mkdir()
    with open(folder / "train.jsonl", "w", encoding="utf-8") as f:
        for i in range(200):
            f.write(json.dumps({"id": str(i), "translation": {"en": f"Book line {i}.", "es": f"Línea {i} del libro."}}) + "\n")
        f.write(json.dumps({"id": "x", "translation": {"en": "", "es": "vacía"}}) + "\n")
    dm = TranslationDataModule(hub_path=str(folder), cache_dir=str(tmp_path / "c"), vocab_size=300, max_tokens=256,
                               val_fraction=0.1, test_fraction=0.1)
    dm.setup()
    assert dm.report.kept == 200 and dm.report.skipped_empty == 1
    assert sum(len(s) for s in dm.splits.values()) == 200
    assert next(iter(dm.train_dataloader()))["src"].dtype == torch.long
