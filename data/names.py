"""Names that pass through: the training pairs' names swapped for names of many languages.

Tatoeba names almost no one but Tom and Mary (and Boston), so a model trained on it never learns
that a name it has not seen is copied, not translated: "My name is Oluwaseun." came out as "Mi
nombre es Juyu.". Here a share of the training pairs whose English and Spanish sides hold the
same name get another name, the same on both sides, drawn from ``NAMES`` (people, towns and
companies of many origins). Which words are names is read from the corpus itself: capitalized words
found in both sides of pairs and in the middle of English sentences (so "No", "Oh" are not), and
not parts of longer names ("New York", "San Francisco"). Validation and test keep their own names.
The swap is drawn once, seeded, when the data is built: the cache and the batches stay as they are.
"""

from __future__ import annotations

import random
import re
from collections import Counter

# Replacement names: people, towns and companies from many languages, in Latin script. The copy check
# (scripts/copy_check.py) uses names outside this list, so that it measures copying, not memory.
NAMES = (
    # people
    "Katarzyna", "Oluwaseun", "Dmitri", "Priyanka", "Xiaoling", "Haruto", "Aisha", "Mehmet", "Nguyen", "Siobhan",
    "Wojciech", "Chiamaka", "Anastasia", "Rajesh", "Mei", "Kenji", "Fatima", "Emre", "Thanh", "Aoife",
    "Bartosz", "Ngozi", "Svetlana", "Deepika", "Jun", "Yuki", "Omar", "Ayse", "Linh", "Niamh",
    "Agnieszka", "Kwame", "Yevgeny", "Arjun", "Wei", "Sakura", "Karim", "Burak", "Huong", "Ciaran",
    "Malgorzata", "Adebayo", "Olga", "Sanjay", "Jing", "Takeshi", "Layla", "Elif", "Duc", "Eoghan",
    "Zbigniew", "Amara", "Igor", "Lakshmi", "Hao", "Akira", "Youssef", "Zeynep", "Minh", "Saoirse",
    "Henrik", "Ingrid", "Astrid", "Leif", "Sigrid", "Jukka", "Aino", "Tapio", "Zsofia", "Laszlo",
    "Dimitris", "Eleni", "Giorgos", "Ioana", "Bogdan", "Milos", "Jelena", "Tomasz", "Zuzana", "Jiri",
    "Kofi", "Abebe", "Wanjiru", "Themba", "Zanele", "Tendai", "Moana", "Keanu", "Tupac", "Inti",
    "Joao", "Conceicao", "Goncalo", "Giulia", "Matteo", "Chiara", "Klaus", "Wolfgang", "Greta", "Anouk",
    "Bram", "Sven", "Hyun", "Jiwoo", "Seojun", "Arash", "Shirin", "Dariush", "Ravi", "Ananya",
    # towns
    "Wroclaw", "Bangalore", "Lagos", "Novosibirsk", "Chengdu", "Sendai", "Izmir", "Danang", "Galway", "Gdansk",
    "Ibadan", "Yekaterinburg", "Pune", "Hangzhou", "Fukuoka", "Konya", "Hue", "Limerick", "Poznan", "Kumasi",
    "Tampere", "Debrecen", "Thessaloniki", "Cluj", "Brno", "Ljubljana", "Nairobi", "Durban", "Kigali", "Cusco",
    "Arequipa", "Rosario", "Porto", "Bologna", "Leipzig", "Utrecht", "Aarhus", "Bergen", "Daegu", "Shiraz",
    # companies
    "Siemens", "Infosys", "Tencent", "Gazprom", "Samsung", "Nokia", "Ericsson", "Philips", "Bosch", "Petrobras",
)
WORD = re.compile(r"\b[A-Z][a-z]+\b")
MID_SENTENCE = re.compile(r"(?<=[a-z,] )[A-Z][a-z]+\b")  # capitalized after a lower-case word: a name
LONGER_NAME = re.compile(r"(?<=[a-z,] )[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")  # "New York", "San Francisco"


def corpus_names(pairs: list[tuple[str, str]], min_count: int = 3) -> set[str]:
    """The words that are names in ``pairs``: in both sides of at least ``min_count`` pairs, capitalized in
    the middle of English sentences as often, and in a longer name (two capitalized words) at most a
    third of the time."""
    shared, middle, in_longer = Counter(), Counter(), Counter()
    for english, spanish in pairs:
        spanish_words = set(WORD.findall(spanish))
        shared.update(word for word in set(WORD.findall(english)) if word in spanish_words)
        middle.update(MID_SENTENCE.findall(english))
        in_longer.update(word for run in LONGER_NAME.findall(english) for word in run.split())
    return {word for word, count in shared.items() if len(word) > 2  # not "Dr"
            and count >= min_count and middle[word] >= min_count and in_longer[word] <= middle[word] / 3}


def swap_names(pairs: list[tuple[str, str]], share: float, seed: int) -> tuple[list[tuple[str, str]], int]:
    """``pairs`` with the names of about ``share`` of those that hold one on both sides replaced (each name
    by one from ``NAMES``, the same on both sides); returns them and how many pairs changed."""
    names = corpus_names(pairs)
    if not names or share <= 0:
        return pairs, 0
    pattern = re.compile(r"\b(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b(?!-)")  # not "Coca-Cola"
    rng, swapped, out = random.Random(seed), 0, []
    for english, spanish in pairs:
        both = sorted(set(pattern.findall(english)) & set(pattern.findall(spanish)))
        if both and rng.random() < share:
            new = dict(zip(both, rng.sample(NAMES, len(both))))
            english, spanish = (pattern.sub(lambda m: new.get(m.group(1), m.group(1)), text) for text in (english, spanish))
            swapped += 1
        out.append((english, spanish))
    return out, swapped
