"""data/copy_cases.py: the sentences the copy check builds and how it counts what was copied."""

from data.copy_cases import MANY_NUMBERS_KIND, Case, cases, copy_shares, holds
from data.entities import contains


def test_a_number_counts_only_as_a_whole():
    assert contains("Tengo 530 gatos.", "530") and contains("Cuesta 1,250 dólares.", "1,250")
    assert not contains("Tengo 15 gatos.", "5") and not contains("Tengo 530 gatos.", "53")
    assert not contains("Cuesta 1,250 dólares.", "250") and not contains("Cuesta 1,250 dólares.", "1")
    assert contains("Vivo en Omsk.", "Omsk") and not contains("Vivo en Omskaya.", "Omsk")


def test_shares_per_kind_on_hand_made_translations():
    checked = [Case("person", ("Ryota",), "My name is Ryota."), Case("person", ("Vesna",), "I met Vesna yesterday."),
               Case("number, 3 digits", ("530",), "I have 530 cats."),
               Case("phone", ("555-0199",), "Call me at 555-0199.")]
    translations = ["Me llamo Ryota.", "Ayer conocí a Vesta.", "Tengo 530 gatos.", "Llámame al 555-019."]
    assert copy_shares(checked, translations) == {"person": (1, 2), "number, 3 digits": (1, 1), "phone": (0, 1)}


def test_every_kind_and_length_is_asked():
    built = cases()
    kinds = {case.kind for case in built}
    assert {f"number, {n} digits" for n in range(1, 8)} <= kinds and {"person", "town", "company", "year", "price",
                                                                       "time", "phone"} <= kinds
    assert {"name that is a word", "hyphen or apostrophe name", "code", MANY_NUMBERS_KIND, "typed slot",
            "translated, not copied"} <= kinds
    assert all(entity in case.sentence for case in built for entity in case.entities) and cases() == built  # seeded
    assert all(len(case.entities[0]) == int(case.kind.split()[1]) for case in built if case.kind.startswith("number"))
    assert all(8 <= len(case.entities) <= 12 for case in built if case.kind == MANY_NUMBERS_KIND)


def test_a_line_of_many_numbers_holds_each_as_often_as_the_source_and_no_other():
    case = Case(MANY_NUMBERS_KIND, ("12", "15", "18", "12"), "Rooms 12, 15, 18 and 12 again.")
    assert holds(case, "Habitaciones 12, 15, 18 y 12 otra vez.") and holds(case, "12, 18, 15, 12")  # any order
    assert not holds(case, "Habitaciones 12, 15 y 18.")  # one 12 lost
    assert not holds(case, "12, 15, 18, 18 y 12") and not holds(case, "12, 15, 18, 12 y 7")  # repeated, invented


def test_a_word_to_translate_counts_when_it_is_not_copied():
    case = Case("translated, not copied", ("London",), "I live in London.", copied=False)
    assert holds(case, "Vivo en Londres.") and not holds(case, "Vivo en London.")
