"""The server's model loop: requests' lines gathered into batches of similar length, oldest first.

The web layer (``server.py``) hands each request's lines to ``Batcher.translate`` and awaits them;
one model thread runs ``Batcher.run``, which takes the next batch, translates it and answers every
request whose lines are all done. A request's answer never depends on the lines it was batched with.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from model.inference.translator import Translation, Translator
from model.search import SearchConfig


@dataclass
class _Job:
    """One request: its lines, their translations as they come, and the future its handler awaits."""

    lines: list[str]
    config: SearchConfig
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    results: list[Translation | None] = field(default_factory=list)
    missing: int = 0  # lines not translated yet

    def __post_init__(self) -> None:
        self.results, self.missing = [None] * len(self.lines), len(self.lines)

    def answer(self, result: object, error: BaseException | None = None) -> None:
        """Hand the handler its result (or error), from the model's thread; a client that left gets nothing."""
        def settle() -> None:
            if not self.future.done():
                self.future.set_exception(error) if error else self.future.set_result(result)
        self.loop.call_soon_threadsafe(settle)


class ServerStopping(RuntimeError):
    """The server stops: work that was waiting is not done."""


@dataclass
class Batcher:
    """Turns requests' lines into model batches, on one model thread. The oldest waiting line goes next,
    with up to ``batch_lines - 1`` waiting lines closest to it in length (the same search setting): a
    batch of similar lengths does not run to one long sentence, no line waits behind ever newer ones,
    a request is answered as soon as its own lines are done, and lines that arrived meanwhile join the
    next batch. When the model is idle, requests arriving within ``window`` seconds start together.

    ``run`` is the model's loop: ``serve`` runs it on the main thread (where PyTorch's CPU thread pool
    runs at full speed; from another thread it ran a third slower), a test client on a thread of its own.
    Other work on the model (n-best, attention) goes through ``call``, between batches."""

    translator: Translator
    window: float = 0.01
    batch_lines: int = 16
    batches: int = 0  # model batches run so far
    running: bool = False  # a thread runs ``run``
    _waiting: list[tuple[_Job, int]] = field(default_factory=list)  # (request, line) in arrival order
    _calls: list[tuple[Callable[[], object], _Job]] = field(default_factory=list)
    _stopping: bool = False
    _changed: threading.Condition = field(default_factory=threading.Condition)

    async def translate(self, lines: list[str], config: SearchConfig) -> list[Translation]:
        job = _Job(lines, config, asyncio.get_running_loop().create_future(), asyncio.get_running_loop())
        with self._changed:
            if self._stopping:
                raise ServerStopping("the server is stopping")
            self._waiting += [(job, i) for i in range(len(lines))]
            self._changed.notify()
        if not lines:
            return []
        return await job.future

    async def call(self, work: Callable[[], object]) -> object:
        """``work()`` on the model's thread, between batches."""
        job = _Job([], SearchConfig(), asyncio.get_running_loop().create_future(), asyncio.get_running_loop())
        with self._changed:
            if self._stopping:
                raise ServerStopping("the server is stopping")
            self._calls.append((work, job))
            self._changed.notify()
        return await job.future

    def run(self) -> None:
        """The model's loop, until ``stop``: one batch (or call) at a time."""
        self.running = True
        while (work := self._next_work()) is not None:
            if isinstance(work, tuple):
                function, job = work
                try:
                    job.answer(function())
                except Exception as error:  # noqa: BLE001 — the request gets the error, the server goes on
                    job.answer(None, error)
            else:
                self._run_batch(work)
        with self._changed:  # what still waits is answered: the server stops
            for job in [job for job, _ in self._waiting] + [job for _, job in self._calls]:
                job.answer(None, ServerStopping("the server is stopping"))
            self._waiting.clear()
            self._calls.clear()

    def stop(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify()

    def _next_work(self) -> list[tuple[_Job, int]] | tuple[Callable[[], object], _Job] | None:
        """The next batch of lines (a list) or call (a tuple); None when stopping."""
        with self._changed:
            while not self._waiting and not self._calls and not self._stopping:
                self._changed.wait()
            if self._stopping:
                return None
            if self._waiting and len(self._waiting) < self.batch_lines:
                # Room in the batch: let the requests sent together (or answered just now, coming back)
                # arrive for a moment, rather than start half-empty.
                self._changed.wait_for(lambda: self._stopping or len(self._waiting) >= self.batch_lines,
                                       timeout=self.window)
            if self._calls:
                return self._calls.pop(0)
            return self._next_batch()

    def _next_batch(self) -> list[tuple[_Job, int]]:
        """The oldest waiting line and the waiting lines of its search setting closest to it in length."""
        self._waiting = [item for item in self._waiting if not item[0].future.done()]  # a client that left
        if not self._waiting:
            return []
        first = self._waiting[0]
        length = len(first[0].lines[first[1]])
        same = [item for item in self._waiting[1:] if item[0].config == first[0].config]
        same.sort(key=lambda item: abs(len(item[0].lines[item[1]]) - length))  # stable: older first on ties
        batch = [first] + same[: self.batch_lines - 1]
        chosen = {(id(job), i) for job, i in batch}
        self._waiting = [item for item in self._waiting if (id(item[0]), item[1]) not in chosen]
        return batch

    def _run_batch(self, batch: list[tuple[_Job, int]]) -> None:
        if not batch:
            return
        try:
            results = self.translator.translate([job.lines[i] for job, i in batch], batch[0][0].config,
                                                batch_size=len(batch))
        except Exception as error:  # noqa: BLE001 — every request in the batch gets the error, the server goes on
            for job, _ in batch:
                job.answer(None, error)
            return
        self.batches += 1
        for (job, i), result in zip(batch, results):  # each request gets exactly its own lines back, in order
            job.results[i] = result
            job.missing -= 1
            if job.missing == 0:
                job.answer(job.results)
