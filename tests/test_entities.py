"""data/entities.py: what is one number, one code, one word, and where a sentence begins."""

from data.entities import contains, tokens


def texts(line: str, kind: str | None = None) -> list[str]:
    return [token.text for token in tokens(line) if kind is None or token.kind == kind]


def test_names_joined_by_a_hyphen_or_an_apostrophe_are_one_word():
    assert texts("Marie-Claire met O'Neill and D’Souza.", "word") == ["Marie-Claire", "met", "O'Neill", "and",
                                                                    "D’Souza"]
    assert texts("Tom's well-known dog.", "word") == ["Tom", "s", "well", "known", "dog"]  # lower case: not one
    assert texts("Ask Jean-Luc-Pierre.", "word") == ["Ask", "Jean-Luc-Pierre"]


def test_letters_and_digits_together_are_one_code_and_a_numbers_suffix_is_not():
    line = "Flight LH2045, room 12C, a PS5, an mp3, COVID-19 and B2B."
    assert texts(line, "code") == ["LH2045", "12C", "PS5", "mp3", "COVID-19", "B2B"]
    assert texts(line, "num") == [] and "LH" not in texts(line)
    line = "The 4th boy, at 10am, in the 1990s, a 10-year-old."
    assert texts(line, "code") == [] and texts(line, "num") == ["4", "10", "1990", "10"]
    assert texts("私はPS5を買った。", "code") == ["PS5"]


def test_typed_slot_syntax_is_one_code_and_holds_no_number():
    assert texts("Write <name1> and <num12> here.") == ["Write", "<name1>", "and", "<num12>", "here"]
    assert [t.kind for t in tokens("<num3>")] == ["code"]


def test_a_word_knows_whether_it_begins_a_sentence():
    first = {t.text: t.first for t in tokens('Rose is here. "Daisy too?" Tell Hunter (Will), he said "Bill".')}
    assert first == {"Rose": True, "is": False, "here": False, "Daisy": True, "too": False, "Tell": True,
                     "Hunter": False, "Will": False, "he": False, "said": False, "Bill": True}  # a quote opens one


def test_a_capital_after_a_colon_or_an_opening_quote_is_the_sentences():
    first = {t.text: t.first for t in tokens('Note: Keep it. She said: "Wait here." He asked, «Where is Tom?»')}
    assert first["Keep"] and first["Wait"] and first["Where"] and not first["Tom"]
    assert not any(t.first for t in tokens("It is 10:30 Monday.") if t.text == "Monday")  # a time's colon: no


def test_contains_reads_entities_whole():
    assert contains("Vuelo LH2045 a las 10:45.", "LH2045") and not contains("Vuelo LH20455.", "LH2045")
    assert contains("Hola, Marie-Claire.", "Marie-Claire") and not contains("Hola, Marie-Claire.", "Marie")
    assert contains("Escribe <name1> aquí.", "<name1>") and contains("Compré un iPad.", "iPad")
