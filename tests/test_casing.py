"""data/casing.py: which sentences are in capitals, how they read in sentence case, and the style given back."""

import pytest

from data.casing import CAPS, TITLE, restyled, sentence_cased, style, title_cased


class Words:
    """Stands in for a run's tokenizer: the words its text writes capitalized inside a sentence, and all it holds."""

    def __init__(self, capitalized: set[str], known: set[str]) -> None:
        self.capitalized, self.known = capitalized, known | {word.lower() for word in capitalized}

    def capitalized_inside(self, word: str) -> bool:
        return word in self.capitalized

    def knows(self, word: str) -> bool:
        return word.lower() in self.known

    def written_lower(self, word: str) -> bool:
        return word.lower() in self.known and word not in {"USA", "OK", "NATO"}


@pytest.fixture(scope="module")
def vocabulary() -> Words:
    return Words({"Tom", "London", "I"}, set("lives in do not tell called the best restaurant town where is".split()))


@pytest.mark.parametrize("sentence, expected", [
    ("DO NOT ENTER.", CAPS), ("I'M TOM.", CAPS), ("USA!", None), ("The Best Restaurants In Town", TITLE),
    ("Gone with the Wind", TITLE), ("Go Away.", TITLE), ("¿Dónde Está El Baño?", TITLE), ("Tom loves Mary.", None),
    ("I am OK.", None), ("Tell Daisy I called.", None), ("私は学生です。", None), ("", None)])
def test_style_tells_capitals_from_sentence_case(sentence, expected):
    assert style(sentence) == expected


def test_sentence_case_keeps_what_the_corpus_capitalizes_inside_a_sentence(vocabulary):
    assert sentence_cased("DO NOT TELL TOM I CALLED.", vocabulary) == "Do not tell Tom I called."
    assert sentence_cased("TOM LIVES IN LONDON.", vocabulary) == "Tom lives in London."
    assert sentence_cased("The Best Restaurant In Town", vocabulary) == "The best restaurant in town"
    assert sentence_cased("WHERE IS OLUWASEUN'S NASA BADGE?", vocabulary) == "Where is OLUWASEUN's NASA BADGE?"
    assert sentence_cased("DON'T ENTER.", None) == "Don't enter."  # no vocabulary: lowered but the first


def test_the_translation_gets_the_style_back_as_the_target_writes_it():
    assert restyled("No entres.", CAPS, "es") == "NO ENTRES."
    assert restyled("Los mejores restaurantes de la ciudad", TITLE, "es") == "Los mejores restaurantes de la ciudad"
    assert restyled("The best restaurants in the town", TITLE, "en") == "The Best Restaurants in the Town"
    assert restyled("Hola.", None, "es") == "Hola."


def test_title_case_capitalizes_every_word_as_a_heading_writes_it():
    assert title_cased("don't tell ¿dónde está? the end.") == "Don't Tell ¿Dónde Está? The End."
    assert title_cased("  two  spaces stay") == "  Two  Spaces Stay"


def test_title_case_is_read_only_in_a_language_that_writes_headings_so():
    assert style("Guten Morgen.", "de") is None and style("Guten Morgen.", "en") == TITLE  # German capitalizes nouns
    assert style("DO NOT ENTER.", "de") == CAPS  # capitals in every language
    from data.sentences import LineSplitter

    german = [piece.model_text for piece in LineSplitter("de", "en").pieces("Guten Morgen.") if piece.translated]
    assert german == ["Guten Morgen."]


def test_a_single_word_in_capitals_is_read_in_sentence_case_where_the_text_writes_it_lowered():
    stop = Words(set(), {"stop", "warning", "usa", "ok", "nato"})
    assert style("STOP!", "en", stop) == CAPS and style("WARNING", "en", stop) == CAPS  # a shout, a label
    assert style("USA!", "en", stop) is None and style("OK.", "en", stop) is None  # short acronyms stay as typed
    assert style("NATO", "en", stop) is None  # one the text holds in capitals (Words: not written lowered)
    assert style("STOP!") is None  # without the run's text, a word in capitals may be an acronym
    from data.sentences import LineSplitter

    pieces = LineSplitter("en", "es", stop).pieces("WARNING: The floor is wet.")
    assert [(piece.model_text, piece.style) for piece in pieces if piece.translated] == [
        ("Warning.", CAPS), ("The floor is wet.", None)]  # a label is read with a full stop (data/sentences.py)
