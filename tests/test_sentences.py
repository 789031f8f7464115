"""data/sentences.py: a pasted line cut into sentences, labels and kept marks, and joined back into one line."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data.sentences import LIST_MARKER, LineSplitter, Piece, ended_as, translate_pieces
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
    assert [p.model_text for p in pieces if p.translated] == ["Tom is here.", "The best restaurants in town."]
    assert splitter.join(pieces, ["Tom está aquí.", "Los mejores restaurantes de la ciudad."]) == \
        "TOM ESTÁ AQUÍ. Los mejores restaurantes de la ciudad"  # a heading ends as it began: no full stop


def test_a_piece_without_closing_punctuation_is_read_with_its_languages_full_stop():
    def read(source_lang: str, line: str) -> list[str]:
        return [p.model_text for p in LineSplitter(source_lang, "es").pieces(line) if p.translated]

    assert read("en", "Kitchen") == ["Kitchen."] and read("en", "Open (the file)") == ["Open (the file)."]
    assert read("en", "Note: Close the door") == ["Note.", "Close the door."]  # the label too
    assert read("en", "Where is it?") == ["Where is it?"] and read("en", '"Wait."') == ["Wait."]  # ended already
    assert read("en", "Ingredients:") == ["Ingredients:"]  # a colon last: no stop after it
    assert read("zh", "你好") == ["你好。"] and read("th", "สวัสดี") == ["สวัสดี"]  # Thai writes no full stop
    assert read("hi", "आयु") == ["आयु।"] and read("hy", "Բարև") == ["Բարև։"]  # a vowel sign last is a word's
    splitter = LineSplitter("zh", "en")
    assert splitter.join(splitter.pieces("你好"), ["Hello."]) == "Hello"  # and its translation loses it again


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


LANGUAGES = ["en", "de", "fr", "es", "ja", "zh", "th", "hi", "ar", "ru"]
LINE_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=120)


@settings(max_examples=300, deadline=None, database=None)
@given(line=st.one_of(LINE_TEXT, st.lists(st.sampled_from(["- ", "1. ", "\t", "Note: ", "DO NOT ENTER. ", "“Go.” ",
                                                            "Hola. ", "我是学生。", "ฉันอยู่ที่นี่ ", "  ", "a, b; c"]),
                                          max_size=8).map("".join)),
       source=st.sampled_from(LANGUAGES), target=st.sampled_from(LANGUAGES))
def test_any_line_in_any_language_is_cut_into_pieces_that_join_back_with_its_structure(line, source, target):
    splitter = LineSplitter(source, target, fits=lambda text: len(text) < 40)
    pieces = splitter.pieces(line)
    assert "".join(piece.text for piece in pieces) == line  # nothing lost or added
    translations = [f"«{piece.model_text.strip()}»" for piece in pieces if piece.translated]
    joined = splitter.join(pieces, translations)
    assert "\n" not in joined and joined.count("\t") == line.count("\t")  # one line, every cell
    marker = LIST_MARKER.match(line)
    if marker and any(piece.translated for piece in pieces):
        assert joined.startswith(marker.group())  # a list marker stays where it was


@pytest.mark.parametrize("source, paragraph, row, item, quoted, shouted", [
    ("de", "Ich bin hier. Du bist dort.", "Name:\tAlter", "- Milch kaufen.", "„Komm her.“", "NICHT EINTRETEN."),
    ("fr", "Je suis ici. Tu es là.", "Nom\tÂge", "1. Acheter du lait.", "« Viens ici. »", "NE PAS ENTRER."),
    ("ja", "私は学生です。あなたは？", "名前\t年齢", "- 牛乳を買う。", "「来てください。」", None),
    ("th", "ฉันอยู่ที่นี่ คุณอยู่ที่นั่น", "ชื่อ\tอายุ", "- ซื้อนม", "“มาที่นี่”", None),
    ("hi", "मैं यहाँ हूँ। तुम वहाँ हो।", "नाम\tआयु", "- दूध खरीदें।", "“यहाँ आओ।”", None),
    ("ar", "أنا هنا. أنت هناك.", "الاسم\tالعمر", "- اشتر الحليب.", "«تعال هنا.»", None)])
def test_pasted_text_in_several_scripts_keeps_its_structure(source, paragraph, row, item, quoted, shouted):
    splitter = LineSplitter(source, "en")

    def translated(line: str) -> tuple[list, str]:
        pieces = splitter.pieces(line)
        found = [piece for piece in pieces if piece.translated]
        return found, splitter.join(pieces, [f"<{n}>" for n in range(len(found))])

    assert len(translated(paragraph)[0]) == 2  # a paragraph: its sentences one by one
    assert translated(row)[1] == "<0>\t<1>"  # a table row: its cells
    assert translated(item)[1] == f"{LIST_MARKER.match(item).group()}<0>"  # a list item: its marker kept
    assert translated(quoted)[1] == f"{quoted[0]}<0>{quoted[-1]}"  # a quote: translated inside its marks
    if shouted:  # a line in capitals, where the script has them: read in sentence case, written back in capitals
        pieces, joined = translated(shouted)
        assert pieces[0].style == "caps" and pieces[0].model_text[1:].islower() and joined == "<0>".upper()
