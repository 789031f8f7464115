"""data/in_processes.py: a function over chunks of a list on every core, in order, as one process would give it."""

import io
import os
import time

from tqdm import tqdm

from data import in_processes as module
from data.copy_slots import CopySlots
from data.in_processes import in_processes

SHOWN_AT_ONCE = {"delay": 0, "mininterval": 0, "file": io.StringIO()}  # (a bar in a test: drawn, not seen)


def chunk_sum_and_process(items):
    time.sleep(0.02)  # (long enough that one worker can't take every chunk before the others start)
    return sum(items), os.getpid()


def test_the_chunks_cover_the_list_in_order(monkeypatch):
    items = list(range(100_000))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    bars = []  # the bar made, drawn at every step: its passes add up to the whole
    monkeypatch.setattr(module, "tqdm", lambda **options: bars.append(tqdm(**options | SHOWN_AT_ONCE)) or bars[-1])
    results = in_processes(chunk_sum_and_process, items, desc="summing")
    assert bars[0].desc == "summing" and bars[0].n == bars[0].total > 0
    size = module.CHUNK  # consecutive chunks of this size, in order
    assert [total for total, _ in results] == [sum(items[i : i + size]) for i in range(0, len(items), size)]
    workers = {pid for _, pid in results}
    assert os.getpid() not in workers and len(workers) > 1  # forked workers, more than one
    assert in_processes(chunk_sum_and_process, items[:1000]) == [(sum(range(1000)), os.getpid())]  # too few: here


def test_copy_slots_learned_on_every_core_are_those_of_one(monkeypatch):
    names = ["Tom", "Mary", "Oluwaseun", "London", "Daisy"]
    pairs = [(f"{names[i % 5]} saw {i} cats near the House.",  # Daisy is translated, the others copied
              f"{names[i % 5] if i % 5 < 4 else 'Margarita'} vio {i} gatos cerca de la casa.") for i in range(4_500)]
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(module, "AT_LEAST", 1_000)  # (two processes, chunks of 500, on a list this test affords)
    monkeypatch.setattr(module, "CHUNK", 500)
    parallel = CopySlots.learn(pairs)
    monkeypatch.setattr(module, "AT_LEAST", 10**9)
    serial = CopySlots.learn(pairs)
    assert (parallel.copied, parallel.known, parallel.translated_inside) == (serial.copied, serial.known,
                                                                             serial.translated_inside)
    assert "Tom" in parallel.copied and "Daisy" not in parallel.copied
