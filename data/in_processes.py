"""A function over a list, a chunk at a time in forked processes on every core: the Python work of preparing a
corpus (copy slots and casing learned, lines masked) uses every core, as its tokenizing does, under a bar."""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TypeVar

from tqdm.auto import tqdm

Item, Result = TypeVar("Item"), TypeVar("Result")
AT_LEAST = 20_000  # items per process: below it, starting one costs more than it saves
CHUNK = 10_000  # items handed out at a time: the bar moves, and time left is told, as each is done


def in_processes(function: Callable[[Sequence[Item]], Result], items: Sequence[Item],
                 desc: str | None = None) -> list[Result]:
    """``function`` of consecutive chunks of ``items``, in order: in a process per core (in this one on one core,
    or for fewer than ``AT_LEAST`` items a core). ``function`` must be a module's (or a ``functools.partial`` of
    one), so that a forked process can be handed it. ``desc``: a bar of the pairs done, past 5 seconds."""
    processes = min(os.cpu_count() or 1, len(items) // AT_LEAST)
    forking = processes >= 2 and multiprocessing.get_start_method(allow_none=True) in (None, "fork") \
        and "fork" in multiprocessing.get_all_start_methods()
    chunks = [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)] or [items]
    results = []
    with tqdm(total=len(items), desc=desc, unit="pairs", delay=5, leave=False, disable=desc is None) as bar, \
            frozen_heap() if forking else nullcontext(), \
            multiprocessing.get_context("fork").Pool(processes) if forking else nullcontext() as pool:
        for chunk, result in zip(chunks, pool.imap(function, chunks) if forking else map(function, chunks)):
            results.append(result)
            bar.update(len(chunk))
    return results


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
