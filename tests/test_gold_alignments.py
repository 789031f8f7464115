"""data/gold_alignments.py: the shipped gold sets read whole, in either direction, and written as text."""

import json

import pytest

from data.gold_alignments import FOLDER, GOLD_SETS, gold_sets, read_gold, written
from data.languages import LanguagePair


def test_the_shipped_sets_are_read_whole_with_every_link_in_its_sentences():
    sets = gold_sets(LanguagePair("en", "es"))
    assert sorted(sets) == sorted(GOLD_SETS) and all(len(pairs) == 100 for pairs in sets.values())
    for pairs in sets.values():
        assert all(pair.links and all(s < len(pair.src_words) and t < len(pair.tgt_words) for s, t in pair.links)
                   for pair in pairs)
    assert "¿" in sets["europarl"][2].tgt_words and (4, 0) in sets["europarl"][2].links  # "?" linked to "¿"


def test_spanish_to_english_reads_them_the_other_way_and_other_pairs_have_none():
    forward, backward = gold_sets(LanguagePair("en", "es")), gold_sets(LanguagePair("es", "en"))
    pair, swapped = forward["europarl"][1], backward["europarl"][1]
    assert swapped.src_words == pair.tgt_words and swapped.tgt_words == pair.src_words
    assert swapped.links == {(t, s) for s, t in pair.links}
    assert gold_sets(LanguagePair("en", "nl")) == {} and gold_sets(LanguagePair("es", "nl")) == {}


def test_words_are_written_as_people_write_them():
    text, spans = written(["¿", "Dónde", "está", "Tom", "?"])
    assert text == "¿Dónde está Tom?" and [text[a:b] for a, b in spans] == ["¿", "Dónde", "está", "Tom", "?"]
    text, spans = written(["the", "minutes", "(", "of", "thursday", ")", "were", "n't", "it", "'s", "."])
    assert text == "the minutes (of thursday) weren't it's."
    assert [text[a:b] for a, b in spans][-3:] == ["it", "'s", "."]


def test_a_link_past_the_end_of_its_sentence_is_refused_with_its_line(tmp_path):
    path = tmp_path / "gold.jsonl"
    lines = [{"src_words": ["a"], "tgt_words": ["b"], "alignment": [[0, 0]]},
             {"src_words": ["a"], "tgt_words": ["b"], "alignment": [[0, 1]]}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"gold.jsonl:2: a link points past the end"):
        read_gold(path)
    assert FOLDER.joinpath("README.md").is_file()  # what each set is and where it comes from
