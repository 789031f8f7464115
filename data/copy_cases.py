"""Names and numbers a translation must copy: everyday English sentences around them, and how copying is counted.

People, towns and companies from many languages that the corpus never holds, and numbers (1 to 7
digits, years, prices with a thousands separator, times, phone numbers), each in a few templates:
480 sentences. An entity counts as copied when the translation holds it verbatim, as a whole ("15"
does not count for "5"). Read by ``scripts/copy_check.py`` and by each run's test report.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

from data.copy_slots import contains

PEOPLE = ("Bronislawa", "Obiageli", "Vladlen", "Harpreet", "Xiuying", "Ryota", "Khadija", "Cengiz", "Phuong",
          "Grainne", "Przemyslaw", "Chukwuemeka", "Radoslav", "Sunita", "Zhenya", "Hideki", "Mustafa", "Oyelaran",
          "Tuomas", "Ildiko", "Stavros", "Mihaela", "Vesna", "Kwabena", "Folasade", "Nomvula", "Sione", "Tadeusz",
          "Lorenzo", "Annika")
TOWNS = ("Bydgoszcz", "Ilorin", "Omsk", "Ludhiana", "Kunming", "Kanazawa", "Eskisehir", "Haiphong", "Sligo", "Lublin",
         "Oulu", "Kecskemet", "Patras", "Timisoara", "Ostrava", "Maribor", "Mombasa", "Bulawayo", "Trujillo", "Tromso")
COMPANIES = ("Lufthansa", "Wipro", "Huawei", "Rosneft", "Hyundai", "Heineken", "Carlsberg", "Embraer", "Volvo",
             "Novartis")
TEMPLATES = {
    "person": ("My name is {}.", "{} lives in a small house.", "I met {} yesterday."),
    "town": ("I live in {}.", "{} is a beautiful city.", "We went to {} last year."),
    "company": ("She works at {}.", "{} is a big company.", "My father worked for {}."),
    "number": ("I have {} cats.", "There are {} people in the room."),
    "year": ("I was born in {}.", "This house was built in {}."),
    "price": ("It costs {} dollars.", "He paid {} euros for the car."),
    "time": ("The train leaves at {}.", "The meeting starts at {}."),
    "phone": ("Call me at {}.", "My phone number is {}."),
}


@dataclass(frozen=True)
class Case:
    """One sentence to translate and the entity its translation must contain verbatim."""

    kind: str  # person, town, company, number (with its digits: "number, 3 digits"), year, price, time, phone
    entity: str
    sentence: str


def entities(seed: int = 0) -> dict[str, list[str]]:
    """The entities of each kind (numbers: 15 of each length from 1 to 7 digits), drawn with ``seed``."""
    rng = random.Random(seed)
    found = {"person": list(PEOPLE), "town": list(TOWNS), "company": list(COMPANIES)}
    for digits in range(1, 8):
        low = 0 if digits == 1 else 10 ** (digits - 1)
        found[f"number, {digits} digits"] = [str(rng.randrange(low, 10**digits)) for _ in range(15)]
    found["year"] = [str(rng.randrange(1900, 2030)) for _ in range(15)]
    found["price"] = [f"{rng.randrange(1, 100)},{rng.randrange(0, 1000):03d}" for _ in range(15)]
    found["time"] = [f"{rng.randrange(1, 13)}:{rng.randrange(0, 60):02d}" for _ in range(15)]
    found["phone"] = [f"{rng.randrange(200, 1000)}-{rng.randrange(0, 10000):04d}" for _ in range(15)]
    return found


def cases(seed: int = 0) -> list[Case]:
    """Every entity in every template of its kind."""
    made = []
    for kind, values in entities(seed).items():
        for template in TEMPLATES[kind.split(",")[0]]:
            made += [Case(kind, value, template.format(value)) for value in values]
    return made


def copy_shares(checked: list[Case], translations: list[str]) -> dict[str, tuple[int, int]]:
    """Per kind: (translations holding their entity verbatim, cases)."""
    shares: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for case, translation in zip(checked, translations, strict=True):
        shares[case.kind][0] += contains(translation, case.entity)
        shares[case.kind][1] += 1
    return {kind: (copied, total) for kind, (copied, total) in shares.items()}
