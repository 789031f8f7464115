"""data/datamodule.py: cache reuse, batches, vocabulary hand-off, and a hub-style dataset."""

import json
import shutil
import subprocess
import sys

import pytest
import torch

import data.cache as cache_module
import data.datamodule as datamodule_module
from data.datamodule import TranslationDataModule
from data.tokenizer import tokenizer_fingerprint
from helpers import file_size_limit, small_corpus, small_datamodule


def test_second_run_reuses_the_cache(tmp_path, monkeypatch):
    corpus = small_corpus(tmp_path)
    calls = {"tokenize": 0, "split": 0}
    original_split = cache_module.split_pairs
    original_encode = datamodule_module.TranslationTokenizer.encode_pairs

    def counting_split(*args, **kwargs):
        calls["split"] += 1
        return original_split(*args, **kwargs)

    def counting_encode(self, *args):
        calls["tokenize"] += 1
        return original_encode(self, *args)

    monkeypatch.setattr(cache_module, "split_pairs", counting_split)
    monkeypatch.setattr(datamodule_module.TranslationTokenizer, "encode_pairs", counting_encode)
    settings = dict(corpus_path=str(corpus), cache_dir=str(tmp_path / "cache"), vocab_size=300, max_tokens=512)
    cold = TranslationDataModule(**settings)
    cold.setup()
    cold_calls = dict(calls)
    assert cold_calls["split"] == 1 and cold_calls["tokenize"] >= 3  # one map per split

    warm = TranslationDataModule(**settings)
    warm.setup()
    assert calls == cold_calls  # nothing split or tokenized again: read from the cache files
    assert warm.splits["train"]["src_ids"] == cold.splits["train"]["src_ids"]
    assert warm.report.bad == {"too_few_fields": 1}  # how the corpus was read, kept with the cache

    for other in ({"vocab_size": 320}, {"copy_slots": False}, {"split_digits": True}):  # other settings, other cache
        assert TranslationDataModule(**(settings | other)).settings_folder() != cold.settings_folder()


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
    assert dm.report.kept == 200 and dm.report.bad == {"empty_side": 1}
    assert sum(len(s) for s in dm.splits.values()) == 200
    assert next(iter(dm.train_dataloader()))["src"].dtype == torch.long


def test_a_damaged_cache_is_rebuilt_never_reused_with_another_tokenizer(tmp_path, caplog):
    settings = dict(corpus_path=str(small_corpus(tmp_path)), cache_dir=str(tmp_path / "cache"), vocab_size=300,
                    max_tokens=512)
    first = TranslationDataModule(**settings)
    first.setup()
    folder = first.settings_folder()
    train_ids = list(first.splits["train"]["src_ids"])
    # 1. An unreadable token-id file: rebuilt, with a warning.
    damaged = next(folder.glob("tokenized-train-*.arrow"))
    damaged.write_bytes(b"not an arrow file")
    again = TranslationDataModule(**settings)
    with caplog.at_level("WARNING"):
        again.setup()
    assert "is unreadable" in caplog.text and list(again.splits["train"]["src_ids"]) == train_ids
    # 2. Only the tokenizer removed: a new one is trained, and ids are made with it, not read from
    #    the old files (their names carry the tokenizer's fingerprint).
    shutil.rmtree(folder / "tokenizer")
    old_files = {p.name for p in folder.glob("tokenized-*.arrow")}
    (folder / "tokenizer").mkdir()  # left empty, as a half-deleted folder
    rebuilt = TranslationDataModule(**settings)
    rebuilt.setup()
    fingerprint = tokenizer_fingerprint(folder / "tokenizer")[:16]
    assert all(p.name.endswith(f"{fingerprint}.arrow") for p in folder.glob("tokenized-*.arrow") if p.name not in old_files)
    train = rebuilt.splits["train"]
    assert train["src_ids"][0] == rebuilt.tokenizer.encode_pairs(train["src"][:1], train["tgt"][:1], training=True)[0][0]


def test_two_processes_build_one_cache(tmp_path):
    corpus, cache = small_corpus(tmp_path), tmp_path / "cache"
    script = ("import sys, json; from data.datamodule import TranslationDataModule as D; "
              f"d = D(corpus_path={str(corpus)!r}, cache_dir={str(cache)!r}, vocab_size=300, max_tokens=512); "
              "d.setup(); print(json.dumps(list(d.splits['train']['src_ids'])))")
    processes = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in processes]
    assert all(p.returncode == 0 for p in processes), outputs[0][1].decode()[-2000:]
    assert json.loads(outputs[0][0]) == json.loads(outputs[1][0])


def test_temporary_files_of_a_killed_build_are_removed(tmp_path):
    first = small_datamodule(tmp_path)
    stale = first.settings_folder() / "tmpk1ll3d"  # what a build killed mid-write leaves
    stale.write_bytes(b"partial arrow data")
    again = TranslationDataModule(**first.hparams)  # the same corpus file and settings: the same cache
    again.setup()
    assert not stale.exists() and again.splits["train"].num_rows == first.splits["train"].num_rows


def test_a_full_disk_while_building_is_one_line_and_keeps_nothing_half_built(tmp_path):
    from data.cache import DataCacheError

    settings = dict(corpus_path=str(small_corpus(tmp_path)), cache_dir=str(tmp_path / "cache"), vocab_size=300,
                    max_tokens=512)
    with file_size_limit(4096), pytest.raises(DataCacheError) as error:  # the OS refuses to grow a file past 4 kB
        TranslationDataModule(**settings).setup()
    assert "cannot build the data cache (File too large); nothing half-built is kept" in error.value.strerror
    assert "\n" not in error.value.strerror
    folder = TranslationDataModule(**settings).settings_folder()
    assert not (folder / "splits.partial").exists() and not (folder / "splits").exists()
    TranslationDataModule(**settings).setup()  # space again: it builds
    assert (folder / "splits" / "dataset_dict.json").is_file()


def test_excluded_words_leave_their_pairs_out_of_every_split(tmp_path):
    dm = TranslationDataModule(corpus_path=str(small_corpus(tmp_path)), cache_dir=str(tmp_path / "c"), vocab_size=300,
                               max_tokens=512, val_fraction=0.1, test_fraction=0.1, exclude_words=["7", "NUMBER 12"])
    dm.setup()
    sources = [s for split in ("train", "validation", "test") for s in dm.sources(split)]
    assert len(sources) == 298 and "Sentence number 17 is here." in sources  # whole words, in any case
    assert not {"Sentence number 7 is here.", "Sentence number 12 is here."} & set(sources)


def test_the_coverage_line_counts_pieces_per_word_and_characters_never_seen():
    from data.coverage import coverage_line

    original = {"src": ["a b", "c"], "tgt": ["x y"], "src_ids": [[5, 6, 2], [7, 2]], "tgt_ids": [[8, 9]]}
    new = {"src": ["a bß"], "tgt": ["xø"], "src_ids": [[5, 6, 10, 11, 2]], "tgt_ids": [[8, 12, 13]]}
    assert coverage_line(new, original) == (
        "tokenizer coverage of the new corpus: pieces per word src 2.00 (original 1.00), tgt 3.00 (original 1.00); "
        "2 characters the original never held: ß ø")


def test_words_of_scripts_without_spaces_are_counted_and_found():
    from data.coverage import pieces_per_word
    from data.splits import word_pattern

    assert pieces_per_word(["我是医生。", "I am a doctor."], [[1, 2, 3, 4, 5], [6, 7, 8, 9]]) == 9 / 8  # 4 + 4 words
    topic = word_pattern(["医生", "หมอ", "doctor"])
    assert topic.search("我是医生。") and topic.search("ฉันเป็นหมอ") and topic.search("The Doctor is in.")
    assert not topic.search("a doctoral thesis")  # a word of a spaced script stays whole
