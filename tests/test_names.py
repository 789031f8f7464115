"""data/names.py: the corpus' names found, and swapped the same on both sides of training pairs only."""

import re

from data.names import NAMES, corpus_names, swap_names
from data.splits import split_pairs, with_swapped_names

PAIRS = [
    ("Tom is tall.", "Tom es alto."), ("I saw Tom and Mary.", "Vi a Tom y a Mary."),
    ("Tell Tom I called.", "Dile a Tom que llamé."), ("Mary likes Boston.", "A Mary le gusta Boston."),
    ("She lives in Boston now.", "Ella vive en Boston ahora."), ("I met Mary there.", "Conocí a Mary allí."),
    ("We flew to Boston.", "Volamos a Boston."), ("No, thanks.", "No, gracias."), ("No way.", "No hay manera."),
    ("No problem.", "No hay problema."), ("I love New York.", "Me encanta Nueva York."),
    ("He lives in New York.", "Él vive en New York."), ("New York is big.", "New York es grande."),
    ("Visit New York.", "Visita New York."),
] * 3


def test_the_corpus_names_are_names_not_sentence_starts_or_parts_of_longer_names():
    assert corpus_names(PAIRS) == {"Tom", "Mary", "Boston"}  # not "No", "New" or "York"


def test_names_are_swapped_the_same_on_both_sides_and_only_names():
    swapped, count = swap_names(PAIRS, share=1.0, seed=0)
    assert count == sum(bool(re.search(r"\b(Tom|Mary|Boston)\b", english)) for english, _ in PAIRS)
    for (english, spanish), (new_english, new_spanish) in zip(PAIRS, swapped):
        if not re.search(r"\b(Tom|Mary|Boston)\b", english):
            assert (new_english, new_spanish) == (english, spanish)
            continue
        new = [name for name in NAMES if re.search(rf"\b{name}\b", new_english)]
        assert new and all(re.search(rf"\b{name}\b", new_spanish) for name in new)
        assert not re.search(r"\b(Tom|Mary|Boston)\b", new_english + new_spanish)
        assert re.sub(r"\b[A-Z]\w+", "X", new_english)[1:] == re.sub(r"\b[A-Z]\w+", "X", english)[1:]  # the rest kept
    assert swap_names(PAIRS, share=1.0, seed=0) == (swapped, count)  # seeded
    half, half_count = swap_names(PAIRS, share=0.5, seed=0)
    assert 0 < half_count < count and swap_names(PAIRS, share=0.0, seed=0) == (PAIRS, 0)


def test_validation_and_test_keep_their_names():
    pairs = [(f"Tom has {i} cats.", f"Tom tiene {i} gatos.") for i in range(200)] + \
        [(f"I saw Tom at {i}.", f"Vi a Tom a las {i}.") for i in range(200)]
    splits = split_pairs(pairs, 0.1, 0.1, seed=3)
    train = with_swapped_names(splits["train"], 1.0, seed=3)
    assert not any(re.search(r"\bTom\b", english) for english in train["src"])
    assert train["refs"] == [[spanish] for spanish in train["tgt"]] and len(train) == len(splits["train"])
    assert all("Tom" in english for split in ("validation", "test") for english in splits[split]["src"])
