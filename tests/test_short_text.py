"""model/scoring/short_text.py: short text scored (BLEU, chrF, exact matches) in all and per kind."""

import pytest

from data.fragments import Fragment
from model.scoring.short_text import fragment_scores, same

FRAGMENTS = [Fragment("Kitchen", ["Cocina"], "entry"), Fragment("Help", ["Ayuda", "Socorro"], "entry"),
             Fragment("the red car", ["el coche rojo"], "phrase"), Fragment("Opening hours", ["Horario"], "phrase")]


def test_an_exact_match_ignores_case_and_the_final_stop_only():
    assert same("Cocina.", "cocina") and same(" AYUDA ", "Ayuda") and not same("La cocina", "Cocina")


def test_short_text_is_scored_in_all_and_per_kind_against_the_sentences():
    answers = {"Kitchen": "Cocina.", "Help": "Socorro", "the red car": "el coche rojo", "Opening hours": "Abre horas"}
    scores = fragment_scores(lambda lines: [answers[line] for line in lines], FRAGMENTS, "es", sentence_chrf=60.0)
    assert scores["fragments"] == 4 and scores["exact_match"] == pytest.approx(0.75)
    assert scores["by_kind"]["entry"]["exact_match"] == 1.0 and scores["by_kind"]["phrase"]["exact_match"] == 0.5
    assert scores["chrf_ratio"] == pytest.approx(scores["chrf"] / 60.0, abs=1e-3)
    assert scores["examples"]["phrase"][1] == ["Opening hours", "Abre horas", "Horario"]
    perfect = fragment_scores(lambda lines: [answers[line] for line in lines][:0] or
                              [f.references[0] for f in FRAGMENTS], FRAGMENTS, "es", 60.0)
    assert perfect["chrf"] > scores["chrf"] and perfect["exact_match"] == 1.0
    assert fragment_scores(lambda lines: lines, [], "es", 60.0) is None
