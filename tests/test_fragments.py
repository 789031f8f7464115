"""data/fragments.py: phrase pairs read off a word alignment, and the short text cut from a split's pairs."""

from data.fragments import consistent_phrases, fragments, phrase, word_links, words
import random

PAIRS = [("The red car is fast.", "El coche rojo es rápido."), ("The red house is big.", "La casa roja es grande."),
         ("My car is red.", "Mi coche es rojo."), ("The house is fast.", "La casa es rápida."),
         ("A big car.", "Un coche grande."), ("My house is big.", "Mi casa es grande.")] * 20


def test_a_phrase_is_a_source_span_whose_target_words_are_aligned_to_nothing_outside_it():
    # "the red car" → "el coche rojo": target 1 ← source 2, target 2 ← source 1 (crossed), "el" ← "the".
    links = [0, 2, 1]
    assert (1, 2, 1, 2) in consistent_phrases(links, 3) and (0, 2, 0, 2) in consistent_phrases(links, 3)
    assert (0, 1, 0, 2) not in consistent_phrases(links, 3)  # "the red" → "el coche rojo" holds "coche" ← "car"
    assert (1, 1, 2, 2) in consistent_phrases(links, 3)  # "red" → "rojo"
    assert consistent_phrases([-1, -1], 2) == []  # nothing aligned: no phrase


def test_a_phrase_begins_and_ends_with_an_aligned_uncommon_word_and_is_cut_as_written():
    source, target = "The red car is fast.", "El coche rojo es rápido."
    links = [0, 2, 1, 3, 4, 5]  # word by word, "coche rojo" crossed
    for seed in range(20):
        cut = phrase(source, target, links, {"the", "is", "."}, random.Random(seed))
        assert cut is not None and cut[0] in source and cut[1] in target
        assert cut[0] not in ("The", "is", "The red car is fast") and not cut[0].endswith(".")
    assert phrase(source, target, [-1] * 6, set(), random.Random(0)) is None


def test_the_word_alignment_links_the_words_that_go_together():
    links = word_links(PAIRS)[0]  # "The red car is fast ." → "El coche rojo es rápido ."
    assert len(links) == len(words(PAIRS[0][1]))
    assert links[1] == 2 and links[2] == 1  # coche ← car, rojo ← red


def test_short_text_is_cut_from_the_pairs_given_and_nothing_else():
    sources = [s for s, _ in PAIRS[:6]] + ["Fast.", "Big house"]
    references = [[t] for _, t in PAIRS[:6]] + [["Rápido."], ["Casa grande", "Gran casa"]]
    found = fragments(sources, references, context=PAIRS, seed=3)
    entries = [f for f in found if f.kind == "entry"]
    assert [(f.source, f.references) for f in entries] == [("Fast.", ["Rápido."]),
                                                          ("Big house", ["Casa grande", "Gran casa"])]
    phrases = [f for f in found if f.kind == "phrase"]
    assert phrases and len({f.source.lower() for f in phrases}) == len(phrases)  # each once
    for f in phrases:  # cut from one of the split's own pairs (a capital given to every other one)
        assert 1 <= sum(w.group()[0].isalnum() for w in words(f.source)) <= 4 and not f.source.endswith(".")
        assert any(f.source.lower() in s.lower() and f.references[0].lower() in r[0].lower()
                   for s, r in zip(sources, references))
    assert any(f.source[0].isupper() and not any(s.startswith(f.source) for s in sources) for f in phrases)


def test_short_pairs_learned_are_cut_from_training_pairs_never_from_validation_or_test(tmp_path):
    import re

    from data.datamodule import TranslationDataModule
    from data.splits import column
    from helpers import small_corpus

    datamodule = TranslationDataModule(corpus_path=str(small_corpus(tmp_path, 600)), cache_dir=str(tmp_path / "cache"),
                                       vocab_size=300, max_tokens=512, val_fraction=0.1, test_fraction=0.1,
                                       short_text=0.5)
    datamodule.setup()
    train = column(datamodule.splits["train"], "src")
    sentences = [s for s in train if s.startswith("Sentence number")]
    short = [s for s in train if not s.startswith("Sentence number")]
    assert 100 < len(short) <= len(sentences) // 2  # one phrase of each of half of the training pairs
    number = lambda text: set(re.findall(r"\d+", text))  # noqa: E731 — each sentence has its own
    held_out = {n for split in ("validation", "test") for s in datamodule.sources(split) for n in number(s)}
    assert all(not number(s) & held_out and any(s.lower().rstrip(".") in t.lower() for t in sentences) for s in short)
    assert any(number(s) for s in short) and any(s[0].isupper() for s in short) and any(s[0].islower() for s in short)
    assert all(s.endswith(".") for s in short)  # read with a stop, as a bare piece is when translated


def test_the_shipped_labels_are_read_in_either_direction_every_row_with_its_translations():
    from data.fragments import LABELS, Fragment, labels

    rows = [line for line in (LABELS / "en-es.tsv").read_text(encoding="utf-8").splitlines()
            if not line.startswith("#")][1:]
    english, spanish = labels("en", "es"), labels("es", "en")
    assert len(english) == len(spanish) == len(rows) >= 60  # no row lost to a bad line
    assert english[0] == Fragment("Kitchen", ["Cocina", "La cocina"], "label")
    assert spanish[0] == Fragment("Cocina", ["Kitchen"], "label")
    assert all(f.source and all(f.references) and f.kind == "label" for f in english + spanish)
    assert labels("en", "nl") == []  # a pair without a list
