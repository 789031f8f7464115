"""A function over a list, one chunk per core in forked processes: the Python work of preparing a corpus (copy
slots and casing learned, lines masked) uses every core, as its tokenizing does."""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

Item, Result = TypeVar("Item"), TypeVar("Result")
AT_LEAST = 20_000  # items per process: below it, starting one costs more than it saves


def in_processes(function: Callable[[Sequence[Item]], Result], items: Sequence[Item]) -> list[Result]:
    """``function`` of consecutive chunks of ``items``, in order: one chunk per core (in this process on one core,
    or for fewer than ``AT_LEAST`` items a core). ``function`` must be a module's (or a ``functools.partial`` of
    one), so that a forked process can be handed it."""
    processes = min(os.cpu_count() or 1, len(items) // AT_LEAST)
    if processes < 2 or multiprocessing.get_start_method(allow_none=True) not in (None, "fork") \
            or "fork" not in multiprocessing.get_all_start_methods():
        return [function(items)]
    size = -(-len(items) // processes)
    with frozen_heap(), multiprocessing.get_context("fork").Pool(processes) as pool:
        return pool.map(function, [items[i : i + size] for i in range(0, len(items), size)], chunksize=1)


@contextmanager
def frozen_heap() -> Iterator[None]:
    """While processes are forked: the objects this one holds are left out of their garbage collections, which
    would otherwise write to every one of them and so copy the parent's memory page by page (a tenth of the time
    of tokenizing millions of pairs)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
