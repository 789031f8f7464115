"""The copy check's sentences: what a translation must copy (names, numbers, codes, lists, typed slots) and what it
must translate, in everyday English sentences, and how each is counted (docs/results.md); read by
``scripts/copy_check.py`` and by each run's test report."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from data.entities import NUMBER, TYPED_SLOT, WORD, contains

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
    "name that is a word": ("Tell {} I called.", "My cousin {} lives here.", "I saw {} at the market."),
    "hyphen or apostrophe name": ("My name is {}.", "{} lives in a small house.", "I met {} yesterday."),
}
WORD_NAMES = ("Daisy", "Hunter", "Rose", "Bill", "Will", "Mark", "Grace", "Penny", "Dawn", "Sunny", "Miles", "Chase",
              "Drew", "Crystal", "Frank")  # each an English word in lower case
JOINED_NAMES = ("Marie-Claire", "Jean-Luc", "Anne-Sophie", "Hans-Peter", "Mary-Kate", "O'Neill", "O'Brien",
                "D'Souza", "D'Angelo", "O'Connor")
CODES = {  # template: codes
    "My flight is {}.": ("LH2045", "BA117", "AF1234", "KL1001", "IB3170"),
    "I am in room {}.": ("12C", "4B", "101A", "7D", "22F"),
    "I bought a {} yesterday.": ("PS5", "iPad", "iPhone", "MP3", "GTX1080"),
    "I found it on {}.": ("eBay", "YouTube", "PayPal", "LinkedIn", "WhatsApp"),
}
MANY_NUMBERS_KIND = "8 to 12 numbers"
MANY_NUMBERS = ("The prices are {} dollars.", "Rooms {} are free.", "Call {}.")
TYPED_SLOTS = ("Write <name1> in the form.", "Replace <num1> with your age.", "The letter says <name2> and <num3>.",
               "Type <name1> here.", "Put <num2> in the box.", "Dear <name1>, thank you.")
TRANSLATED = ("We leave on Monday.", "The shop is closed on Sunday.", "My birthday is in January.",
              "She speaks English well.", "I am learning French.", "Do you speak Spanish?", "He lives in Germany.",
              "We travelled to Spain.", "I live in London.", "We met at Christmas.", "See you on Sunday.",
              "School starts in September.", "He speaks German.", "Is this book in English?", "They moved to France.",
              "I visited Italy.", "We will meet on Friday.", "My mother is Russian.", "He came back from Sweden.",
              "The party is on Saturday.")  # each word spelled otherwise in Spanish and in Dutch
ORDINARY_KIND = "ordinary words after labels, list markers, quotes, in headings and capitals"
ORDINARY = (("Note: Wait here.", "Wait"), ("Attention: Keep your ticket.", "Keep"), ("Reminder: Call your mother.", "Call"),
            ("Warning: Close the door.", "Close"), ("* Turn off the lights.", "Turn"), ("- Wash your hands.", "Wash"),
            ("• Feed the dog.", "Feed"), ("1. Close the window.", "Close"), ("2) Call your mother.", "Call"),
            ("a) Leave the keys here.", "Leave"), ('She said: "Wait here."', "Wait"),
            ('He asked, "Where is the book?"', "Where"), ('Tom said, "Please help me."', "Please"),
            ("The Old House On The Hill", "House"), ("My Best Friends", "Friends"), ("A Dog In The Garden", "Dog"),
            ("DO NOT ENTER.", "ENTER"), ("PLEASE WAIT HERE.", "WAIT"), ("CLOSE THE DOOR.", "DOOR"),
            ("I LOVE MY DOG.", "DOG"))  # (line, the word to translate): each spelled otherwise in Spanish and Dutch


@dataclass(frozen=True)
class Case:
    """One sentence to translate and the entities its translation must contain verbatim (or must not)."""

    kind: str  # person, town, company, number (with its digits: "number, 3 digits"), year, price, ...
    entities: tuple[str, ...]
    sentence: str
    copied: bool = True  # False: a word the translation must translate, not copy


def holds(case: Case, translation: str) -> bool:
    """The translation copies the case's entities (a line of many numbers: each as often as the source, and
    no other number), or, for a word to translate, does not hold it."""
    if not case.copied:
        return not contains(translation, case.entities[0])
    if case.kind == MANY_NUMBERS_KIND:
        return Counter(NUMBER.findall(translation)) == Counter(case.entities)
    return all(contains(translation, entity) for entity in case.entities)


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
    found["name that is a word"], found["hyphen or apostrophe name"] = list(WORD_NAMES), list(JOINED_NAMES)
    return found


def cases(seed: int = 0) -> list[Case]:
    """Every entity in every template of its kind."""
    made = []
    for kind, values in entities(seed).items():
        for template in TEMPLATES[kind.split(",")[0]]:
            made += [Case(kind, (value,), template.format(value)) for value in values]
    made += [Case("code", (code,), template.format(code)) for template, codes in CODES.items() for code in codes]
    rng = random.Random(seed)
    for count in range(8, 13):
        for template in MANY_NUMBERS:
            for _ in range(2):
                numbers = [str(n) for n in rng.sample(range(10, 1000), count)]
                listed = f"{', '.join(numbers[:-1])} and {numbers[-1]}"
                made.append(Case(MANY_NUMBERS_KIND, tuple(numbers), template.format(listed)))
    made += [Case("typed slot", tuple(TYPED_SLOT.findall(line)), line) for line in TYPED_SLOTS]
    made += [Case("translated, not copied", (WORD.findall(line)[-1],), line, copied=False) for line in TRANSLATED]
    made += [Case(ORDINARY_KIND, (word,), line, copied=False) for line, word in ORDINARY]
    return made


def copy_shares(checked: list[Case], translations: list[str]) -> dict[str, tuple[int, int]]:
    """Per kind: (translations that hold what they must, cases)."""
    held = Counter(case.kind for case, text in zip(checked, translations, strict=True) if holds(case, text))
    return {kind: (held[kind], total) for kind, total in Counter(case.kind for case in checked).items()}
