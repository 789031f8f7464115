"""model/scoring/pasted_text.py: the test split scored as people paste it, beside one sentence a line."""

import pytest

from model.scoring.pasted_text import paragraph_references, paragraphs, pasted_scores

SOURCES = ["I like cats.", "It is late.", "Where is Tom?", "The sky is blue.", "Hello."]
REFERENCES = [["Me gustan los gatos."], ["Es tarde.", "Ya es tarde."], ["¿Dónde está Tom?"], ["El cielo es azul."],
              ["Hola."]]
TRANSLATIONS = dict(zip([s.lower() for s in SOURCES], [r[0] for r in REFERENCES]))


def test_paragraphs_join_four_sentences_and_their_kth_references():
    assert paragraphs(SOURCES) == [" ".join(SOURCES[:4]), "Hello."]
    assert paragraph_references(REFERENCES) == [
        ["Me gustan los gatos. Es tarde. ¿Dónde está Tom? El cielo es azul.",
         "Me gustan los gatos. Ya es tarde. ¿Dónde está Tom? El cielo es azul."], ["Hola."]]


def perfect_sentence_by_sentence(lines: list[str]) -> list[str]:
    """A translator that knows each sentence in any case, but reads a paragraph's first sentence only."""
    out = []
    for line in lines:
        first = next(s for s in TRANSLATIONS if line.lower().startswith(s))
        out.append(TRANSLATIONS[first].upper() if line.isupper() else TRANSLATIONS[first])
    return out


def test_the_scores_show_what_a_paragraph_and_capitals_cost():
    scores = pasted_scores(perfect_sentence_by_sentence, SOURCES, REFERENCES, "es")
    assert scores["case_insensitive_bleu"] == {"as_written": 100.0, "title_case": 100.0, "all_caps": 100.0}
    assert scores["case_ratio"] == {"title_case": 1.0, "all_caps": 1.0}
    paragraph = scores["paragraph"]
    assert paragraph["sentence_by_sentence_bleu"] == 100.0 and paragraph["bleu"] < 50  # three sentences dropped
    assert paragraph["shorter_than_half"] == 1 and paragraph["paragraphs"] == 2
    assert paragraph["ratio"] == pytest.approx(paragraph["bleu"] / 100, abs=1e-3)
