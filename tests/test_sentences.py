"""data/sentences.py: a pasted line cut into sentences, labels and kept marks, and joined back into one line."""

import pytest

from data.sentences import LineSplitter, Piece, ended_as, translate_pieces
from test_casing import Words

LINES = ["Tom is here. He said: \"Wait here.\" Mr. Smith went to Washington.", "2. Attention: Keep your ticket.",
         "* Turn off the lights.", "  - Indented item!  ", "a) First.\tb) Second.", "DO NOT ENTER. Thank you.",
         "The Best Restaurants In Town", "", "   ", "私は学生です。あなたは？", "Reminder: The meeting starts at noon."]


def translated(pieces: list[Piece]) -> list[str]:
    return [piece.text for piece in pieces if piece.translated]


@pytest.mark.parametrize("line", LINES)
def test_the_pieces_give_the_line_back_character_for_character(line):
    assert "".join(piece.text for piece in LineSplitter("en", "es").pieces(line)) == line


def test_a_paragraph_is_cut_into_its_sentences():
    pieces = LineSplitter("en", "es").pieces(LINES[0])
    assert translated(pieces) == ["Tom is here.", "He said", "Wait here.", "Mr. Smith went to Washington."]
    assert translated(LineSplitter("en", "es").pieces("No. 5 is mine. It is.")) == ["No. 5 is mine.", "It is."]


def test_list_markers_stay_and_labels_are_translated_on_their_own():
    splitter = LineSplitter("en", "es")
    assert [(p.text, p.translated) for p in splitter.pieces("2. Attention: Keep your ticket.")] == [
        ("2. ", False), ("Attention", True), (": ", False), ("Keep your ticket.", True)]
    assert [p.text for p in splitter.pieces("* Turn off the lights.") if not p.translated] == ["* "]
    assert translated(splitter.pieces("a) First.\tb) Second.")) == ["First.", "Second."]  # a tab: cells apart
    assert [(p.text, p.translated) for p in splitter.pieces('She said: «Wait here.»')] == [
        ("She said", True), (": ", False), ("«", False), ("Wait here.", True), ("»", False)]  # the quotes stay
    assert translated(splitter.pieces('"Go," he said.')) == ['"Go," he said.']  # not a quoted sentence
    assert translated(splitter.pieces("It is 10:30: Come now.")) == ["It is 10:30: Come now."]  # not a label
    assert translated(splitter.pieces("Tom has three: apples, pears and figs.")) == [
        "Tom has three: apples, pears and figs."]  # no capital after the colon: no label


def test_joined_with_the_lines_own_spacing_and_markers():
    splitter = LineSplitter("en", "es")
    pieces = splitter.pieces("  - Tom is here.  Wait!  ")
    assert splitter.join(pieces, ["Tom está aquí.", "¡Espera!"]) == "  - Tom está aquí.  ¡Espera!  "
    pieces = splitter.pieces("2. Attention: Keep your ticket.")
    assert splitter.join(pieces, ["Atención.", "Guarde su billete."]) == "2. Atención: Guarde su billete."


def test_targets_without_spaces_join_sentences_without_them_and_spaced_targets_get_one():
    to_japanese = LineSplitter("en", "ja")
    assert to_japanese.join(to_japanese.pieces("I am here. You are there."), ["私です。", "あなたです。"]) == \
        "私です。あなたです。"
    to_english = LineSplitter("ja", "en")
    assert to_english.join(to_english.pieces("私は学生です。あなたは？"), ["I am a student.", "And you?"]) == \
        "I am a student. And you?"
    row = to_japanese.pieces("I am here.\tYou are there.")  # a table row keeps its cells
    assert to_japanese.join(row, ["私です。", "あなたです。"]) == "私です。\tあなたです。"
    to_thai = LineSplitter("en", "th")  # no spaces between words, one between sentences (and no full stop)
    assert to_thai.join(to_thai.pieces("I am here. You are there."), ["ฉันอยู่ที่นี่", "คุณอยู่ที่นั่น"]) == \
        "ฉันอยู่ที่นี่ คุณอยู่ที่นั่น"


def test_capitals_are_read_in_sentence_case_and_written_back():
    splitter = LineSplitter("en", "es", Words({"Tom"}, set("is here the best restaurants in town".split())))
    pieces = splitter.pieces("TOM IS HERE. The Best Restaurants In Town")
    assert [p.model_text for p in pieces if p.translated] == ["Tom is here.", "The best restaurants in town"]
    assert splitter.join(pieces, ["Tom está aquí.", "Los mejores restaurantes de la ciudad."]) == \
        "TOM ESTÁ AQUÍ. Los mejores restaurantes de la ciudad"  # a heading ends as it began: no full stop


def test_an_over_long_sentence_is_cut_at_inner_punctuation_into_pieces_that_fit():
    splitter = LineSplitter("en", "es", fits=lambda text: len(text) <= 30)
    line = "We came early, we sat down; we ate the soup — and then, at last, we went home."
    pieces = splitter.pieces(line)
    assert "".join(p.text for p in pieces) == line
    assert translated(pieces) == ["We came early, we sat down", "we ate the soup — and then", "at last, we went home."]
    assert all(len(text) <= 30 for text in translated(pieces))
    assert translated(splitter.pieces("Supercalifragilisticexpialidocious" * 2 + ".")) == [
        "Supercalifragilisticexpialidocious" * 2 + "."]  # nowhere to cut: whole (the translator truncates it)


def test_a_piece_without_closing_punctuation_loses_the_models_full_stop():
    assert ended_as("Attention", "Atención.") == "Atención" and ended_as("Wait.", "Espera.") == "Espera."
    assert ended_as("Wait", "Espera...") == "Espera..." and ended_as("Where", "¿Dónde?") == "¿Dónde?"
    for source in ("मैं यहाँ हूँ।", "Ես այստեղ եմ։", "ကျွန်တော် ဒီမှာ ရှိတယ်။", "ខ្ញុំនៅទីនេះ។", 'He said: "Wait here."',
                   "(Stop.)", "「止まれ。」"):  # a stop of its script, or one before a closing quote or bracket
        assert ended_as(source, "Estoy aquí.") == "Estoy aquí."
    assert ended_as("Open (the file)", "Abra (el archivo).") == "Abra (el archivo)"


def test_every_distinct_sentence_is_translated_once_in_one_call():
    splitter, calls = LineSplitter("en", "es"), []

    def translate(texts):
        calls.append(texts)
        return [text.upper() for text in texts]

    lines = [splitter.pieces(line) for line in ("Hi. Bye.", "Bye. Hi.", "", "Hi.")]
    assert translate_pieces(lines, translate) == [["HI.", "BYE."], ["BYE.", "HI."], [], ["HI."]]
    assert calls == [["Hi.", "Bye."]]


def test_the_sentences_a_line_holds_are_counted_cheaply():
    splitter = LineSplitter("en", "es")
    assert [splitter.sentence_count(line) for line in ("Hi. Bye.  ", "", "Mr. Smith is here.", "a b c")] == [2, 0, 1, 1]


def test_a_sentence_in_capitals_is_measured_as_the_model_reads_it():
    # A model whose every capital costs a token: the sentence fits in sentence case, not as typed.
    splitter = LineSplitter("en", "es", fits=lambda text: sum(map(str.isupper, text)) <= 2)
    pieces = splitter.pieces("WE WENT HOME, ATE DINNER, AND SLEPT.")
    assert [piece.model_text for piece in pieces if piece.translated] == ["We went home, ate dinner, and slept."]
