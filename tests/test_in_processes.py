"""data/in_processes.py: a function over chunks of a list on every core, in order, as one process would give it."""

import os

from data import in_processes as module
from data.copy_slots import CopySlots
from data.in_processes import in_processes


def chunk_sum_and_process(items):
    return sum(items), os.getpid()


def test_the_chunks_cover_the_list_in_order(monkeypatch):
    items = list(range(100_000))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    results = in_processes(chunk_sum_and_process, items)
    assert len(results) == 4 and sum(total for total, _ in results) == sum(items)
    assert results[0][0] == sum(range(25_000))  # consecutive chunks, in order
    assert os.getpid() not in {pid for _, pid in results}  # forked workers
    assert in_processes(chunk_sum_and_process, items[:1000]) == [(sum(range(1000)), os.getpid())]  # too few: here


def test_copy_slots_learned_on_every_core_are_those_of_one(monkeypatch):
    names = ["Tom", "Mary", "Oluwaseun", "London", "Daisy"]
    pairs = [(f"{names[i % 5]} saw {i} cats near the House.",  # Daisy is translated, the others copied
              f"{names[i % 5] if i % 5 < 4 else 'Margarita'} vio {i} gatos cerca de la casa.") for i in range(45_000)]
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    parallel = CopySlots.learn(pairs)
    monkeypatch.setattr(module, "AT_LEAST", 10**9)
    serial = CopySlots.learn(pairs)
    assert (parallel.copied, parallel.known, parallel.translated_inside) == (serial.copied, serial.known,
                                                                             serial.translated_inside)
    assert "Tom" in parallel.copied and "Daisy" not in parallel.copied
