"""data/markup.py: inline Markdown set aside before the model and put back around the aligned words."""

import pytest

from data.markup import put_back, set_aside

WORD_FOR_WORD = [(n, n) for n in range(8)]


def test_bold_goes_around_the_aligned_words_and_punctuation_stays_outside():
    aside = set_aside("Press **Save now** to keep it.")
    assert aside.plain == "Press Save now to keep it." and aside.pasted_word == [0, 1, 2, 3, 4, 5]
    text, alignment = put_back(aside, "Pulse Guardar ya para conservarlo.", [(0, 0), (1, 1), (2, 2), (3, 3), (5, 4)])
    assert text == "Pulse **Guardar ya** para conservarlo." and alignment == [(0, 0), (1, 1), (2, 2), (3, 3), (5, 4)]
    aside = set_aside("**Warning:** Do not enter.")  # a label in bold: its colon outside the markers
    assert put_back(aside, "Advertencia: No entre.", [(0, 0), (1, 1), (3, 2)])[0] == "**Advertencia**: No entre."
    reordered = set_aside("The *red* car.")  # the target order, not the source's: "el coche *rojo*"
    assert put_back(reordered, "El coche rojo.", [(0, 0), (1, 2), (2, 1)])[0] == "El coche *rojo*."


def test_a_link_keeps_its_address_and_wraps_the_words_of_its_text():
    aside = set_aside("See [the guide](https://example.org/a_b?x=1) for *more* help.")
    assert aside.plain == "See the guide for more help."
    text, _ = put_back(aside, "Vea la guía para más ayuda.", WORD_FOR_WORD[:6])
    assert text == "Vea [la guía](https://example.org/a_b?x=1) para *más* ayuda."


def test_a_code_span_is_copied_never_translated_and_the_alignment_is_in_the_pasted_words():
    aside = set_aside("Run `pip install -e .` then **wait**.")
    assert aside.plain == "Run CODE1 then wait." and aside.pasted_word == [0, 1, 5, 6]
    text, alignment = put_back(aside, "Ejecute CODE1 y luego espere.", [(0, 0), (1, 1), (2, 2), (2, 3), (3, 4)])
    assert text == "Ejecute `pip install -e .` y luego **espere**."
    # The span's four words copied word for word; the words after it counted in the pasted lines.
    assert alignment == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (5, 6), (6, 7)]
    text, _ = put_back(aside, "Ejecute y espere.", [(0, 0), (2, 1), (3, 2)])  # the model dropped it: at the end
    assert text == "Ejecute y **espere**. `pip install -e .`"
    shouted = set_aside("RUN `make` NOW.")  # read in sentence case: its placeholder comes back in any case
    assert put_back(shouted, "EJECUTE CODE1 AHORA.", WORD_FOR_WORD[:3])[0] == "EJECUTE `make` AHORA."
    assert set_aside("Type `CODE1` here.").plain == "Type CODE1X here."  # never a placeholder the line holds


@pytest.mark.parametrize("line", ["2 * 3 = 6", "**note without its end", "snake_case_name and a_b", "` alone",
                                  "[text](with spaces)", "* a list item", "Price: 5 *", "**", "a * b * c"])
def test_unbalanced_or_no_markup_stays_text(line):
    aside = set_aside(line)
    assert aside.plain == line and aside.markup == []
    assert put_back(aside, "traducción", [(0, 0)]) == ("traducción", [(0, 0)])


def test_a_word_aligned_with_nothing_keeps_no_markup():
    aside = set_aside("A **big** dog.")
    assert put_back(aside, "Un perro.", [(0, 0), (2, 1)])[0] == "Un perro."
