"""data/copy_cases.py: the sentences the copy check builds and how it counts what was copied."""

from data.copy_cases import Case, cases, copy_shares
from data.copy_slots import contains


def test_a_number_counts_only_as_a_whole():
    assert contains("Tengo 530 gatos.", "530") and contains("Cuesta 1,250 dólares.", "1,250")
    assert not contains("Tengo 15 gatos.", "5") and not contains("Tengo 530 gatos.", "53")
    assert not contains("Cuesta 1,250 dólares.", "250") and not contains("Cuesta 1,250 dólares.", "1")
    assert contains("Vivo en Omsk.", "Omsk") and not contains("Vivo en Omskaya.", "Omsk")


def test_shares_per_kind_on_hand_made_translations():
    checked = [Case("person", "Ryota", "My name is Ryota."), Case("person", "Vesna", "I met Vesna yesterday."),
               Case("number, 3 digits", "530", "I have 530 cats."), Case("phone", "555-0199", "Call me at 555-0199.")]
    translations = ["Me llamo Ryota.", "Ayer conocí a Vesta.", "Tengo 530 gatos.", "Llámame al 555-019."]
    assert copy_shares(checked, translations) == {"person": (1, 2), "number, 3 digits": (1, 1), "phone": (0, 1)}


def test_every_kind_and_length_is_asked():
    built = cases()
    kinds = {case.kind for case in built}
    assert {f"number, {n} digits" for n in range(1, 8)} <= kinds and {"person", "town", "company", "year", "price",
                                                                       "time", "phone"} <= kinds
    assert all(case.entity in case.sentence for case in built) and cases() == built  # seeded
    assert all(len(case.entity) == int(case.kind.split()[1]) for case in built if case.kind.startswith("number"))
