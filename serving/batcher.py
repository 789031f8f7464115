"""The server's model loop: every request's lines in model batches, taking turns, with bounded work. A batch holds
one line of each waiting request (the one served longest ago first), then a second of each, … within ``batch_lines``
and the work done in ``batch_time`` at the measured rate, so a long request cannot make short ones wait behind all of
it; a request's answer never depends on the lines it was batched with.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from model.inference.translator import Translation, Translator
from model.search import SearchConfig
from serving.admission import Admission, Overloaded
from serving.limits import Limits


# One sentence (the translator searches a line sentence by sentence), made distinct by its number (it searches each
# distinct sentence of a call once); any language's tokenizer reads it as some tokens.
WARM_UP = "Hello, how are you and your {} cats today?"


def line_costs(tokens: list[int], config: SearchConfig) -> list[int]:
    """The work of each line, from the source tokens the model reads of it: tokens × beam width."""
    return [n * config.beam_size for n in tokens]


class ServerStopping(RuntimeError):
    """The server stops: work not done yet is not done."""


@dataclass(eq=False)
class Job:
    """One request's work: its lines (or one call on the model), their translations as they come, and the
    future its handler awaits, settled from the model's thread."""

    lines: list[str]
    config: SearchConfig
    costs: list[int]  # work of each line: source tokens × beam width
    future: asyncio.Future  # on its handler's event loop
    deadline: float  # time.monotonic() after which the request is dropped
    call: Callable[[], object] | None = None  # other work on the model (n-best, attention), instead of lines
    results: list[Translation | None] = field(default_factory=list)  # None: not translated yet
    served: int = -1  # the last batch that held one of its lines (-1: none yet)
    unfinished: int = 0  # work not done yet

    def __post_init__(self) -> None:
        self.results, self.unfinished = [None] * len(self.lines), sum(self.costs)

    @property
    def dropped(self) -> bool:
        """Answered already, or its handler gave up on it (the client left, the deadline passed)."""
        return self.future.done()

    def answer(self, result: object = None, error: BaseException | None = None) -> None:
        """Hand the handler its result (or error), from any thread; a handler that gave up gets nothing."""
        def settle() -> None:
            if not self.future.done():
                self.future.set_exception(error) if error else self.future.set_result(result)
        try:
            self.future.get_loop().call_soon_threadsafe(settle)
        except RuntimeError:  # its event loop is closed: nobody waits any more
            pass


@dataclass
class Batcher:
    """Requests' lines into model batches, taking turns, on one model thread (see the module docstring); a request is
    taken only if it can be answered by its deadline (``admission.py``), and one dropped (its deadline passed, its
    client left) leaves the queue and, at its next step, the running search.

    ``run`` is the model's loop: ``serve`` runs it on the main thread (where PyTorch's CPU thread pool
    runs at full speed; from another thread it ran slower), a test client on a thread of its
    own. When fewer lines wait than fill a batch, it waits up to ``window`` seconds for more (requests
    sent together, clients just answered coming back)."""

    translator: Translator
    limits: Limits = field(default_factory=Limits)
    batch_lines: int = 64  # as translate.py's batches; a batch's work is bounded by batch_time too
    batches: int = 0  # model batches run so far
    running: bool = False  # a thread runs ``run``
    rate: float = 0.0  # work done per second working through a queue (0: not measured yet)
    _waiting: list[tuple[Job, int]] = field(default_factory=list)  # (request, line) in arrival order
    _calls: list[Job] = field(default_factory=list)
    _current: list[Job] = field(default_factory=list)  # the requests of the batch (or call) running now
    _taken: int = 0  # batches taken so far
    _queue_measured: bool = False  # ``rate`` is from a batch that left lines waiting (else from one that did not)
    _left_waiting: bool = False  # the batch taken last left lines waiting
    _admission: Admission = field(init=False)
    _stopping: bool = False
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        margin = max(self.limits.batch_time, self.limits.deadline / 4)  # why: admission.py's docstring
        self._admission = Admission(margin=margin, max_work=self.limits.max_work)

    def submit(self, lines: list[str], config: SearchConfig, costs: list[int], deadline: float,
               call: Callable[[], object] | None = None) -> Job:
        """Queue a request's lines (or one ``call`` on the model, costing ``costs[0]``); its ``future`` gets
        the translations in order (or the call's result). Refused at once, ``Overloaded``, when it cannot be
        answered by its deadline (``admission.py``); ``ServerStopping`` once stopping."""
        job = Job(lines, config, costs, asyncio.get_running_loop().create_future(), deadline, call)
        with self._changed:
            if self._stopping:
                raise ServerStopping("the server is stopping")
            self._admission.admit(job, self.rate, time.monotonic())
            job.future.add_done_callback(lambda _: self._settle(job))
            if call is not None:
                self._calls.append(job)
            else:
                self._waiting += [(job, i) for i in range(len(lines))]
            self._changed.notify()
        if not lines and call is None:
            job.answer([])
        return job

    def warm_up(self) -> None:
        """Before serving: a full batch that pays the model's one-time costs (seconds on a CPU), then one that
        measures the rate, so that a flood on a fresh server is taken at about the rate it is served at (the
        flood's own batches then refine it)."""
        config, lines = self.translator.settings.search, [WARM_UP.format(n + 1) for n in range(self.batch_lines)]
        self.translator.translate(lines, config, batch_size=len(lines))
        start = time.monotonic()
        self.translator.translate(lines, config, batch_size=len(lines))
        self.rate = sum(line_costs(self.translator.source_tokens(lines), config)) / (time.monotonic() - start)
        self._queue_measured = True

    def full(self) -> Overloaded | None:
        """Why not even the least request (one token, greedy, due in ``serve.deadline``) could be taken now (None: one
        could); the guard then refuses a request before the app parses it, which a flood needs: most of a request's
        cost on the server is taking it in."""
        with self._changed:
            now = time.monotonic()
            return self._admission.refusal(1, now + self.limits.deadline, self.rate, now)

    def _settle(self, job: Job) -> None:
        """An answered, failed or dropped request's work leaves the admission's account."""
        with self._changed:
            self._admission.settle(job)

    def run(self) -> None:
        """The model's loop, until ``stop``: one batch (or call) at a time."""
        self.running = True
        while (work := self._next_work()) is not None:
            if isinstance(work, Job):
                self._current = [work]
                try:
                    work.answer(work.call())
                except Exception as error:  # noqa: BLE001 — the request gets the error, the server goes on
                    work.answer(error=error)
            else:
                self._run_batch(work)
            self._current = []

    def stop(self) -> None:
        """No new work; what waits or runs is answered ``ServerStopping``; ``run`` returns."""
        with self._changed:
            self._stopping = True
            for job in {*(job for job, _ in self._waiting), *self._calls, *self._current}:
                job.answer(error=ServerStopping("the server is stopping"))
            self._waiting.clear()
            self._calls.clear()
            self._changed.notify()

    def _next_work(self) -> list[tuple[Job, int]] | Job | None:
        """The next batch of lines (a list) or call (a Job); None when stopping."""
        with self._changed:
            while True:
                while not self._waiting and not self._calls and not self._stopping:
                    self._changed.wait()
                if self._stopping:
                    return None
                if self._calls:
                    return self._calls.pop(0)
                if len(self._waiting) < self.batch_lines:  # room: let the lines sent together arrive
                    self._changed.wait_for(lambda: self._stopping or len(self._waiting) >= self.batch_lines,
                                           timeout=self.limits.window)
                if batch := self._next_batch():
                    return batch

    def _next_batch(self) -> list[tuple[Job, int]]:
        """Lines of the waiting requests in turns: the first waiting line of each request (the one served
        longest ago first, with its search setting), then the second of each, … within the batch's bounds."""
        now = time.monotonic()  # a request past its deadline is dropped: its handler answers 504
        self._waiting = [item for item in self._waiting if not item[0].dropped and item[0].deadline >= now]
        if not self._waiting:
            return []
        turns: dict[Job, list[tuple[Job, int]]] = {}  # each request's waiting lines
        for item in self._waiting:
            turns.setdefault(item[0], []).append(item)
        # The request served longest ago goes first (a new one before all that were served), then arrival order.
        order = sorted(turns, key=lambda job: job.served)
        config = order[0].config
        turns = {job: turns[job] for job in order if job.config == config}
        # Work bound of a batch: what the measured rate does in batch_time (one request's worth until measured).
        batch, work, bound = [], 0, self.rate * self.limits.batch_time if self.rate else self.limits.max_work
        while len(batch) < self.batch_lines:
            took = False
            for lines in turns.values():
                if not lines or len(batch) == self.batch_lines:
                    continue
                job, i = lines[0]
                if batch and work + job.costs[i] > bound:
                    continue  # over the batch's work: its turn comes in the next batch
                batch.append(lines.pop(0))
                work, took = work + job.costs[i], True
            if not took:
                break
        chosen = set(batch)
        self._waiting = [item for item in self._waiting if item not in chosen]
        self._left_waiting = bool(self._waiting)
        self._taken += 1
        for job, _ in batch:
            job.served = self._taken
        return batch

    def _run_batch(self, batch: list[tuple[Job, int]]) -> None:
        self._current = list({job for job, _ in batch})
        start = time.monotonic()
        wanted = lambda: [not job.dropped for job, _ in batch]  # noqa: E731 — asked at every step of the search
        try:  # a dropped request's lines leave the search at its next step
            results = self.translator.translate([job.lines[i] for job, i in batch], batch[0][0].config,
                                                batch_size=len(batch), keep_rows=wanted)
        except Exception as error:  # noqa: BLE001 — every request in the batch gets the error, the server goes on
            for job in self._current:
                job.answer(error=error)
            return
        if not any(job.dropped for job in self._current):  # a whole batch: its time measures the rate
            self._measure(sum(job.costs[i] for job, i in batch) / max(time.monotonic() - start, 1e-3))
        self.batches += 1
        with self._changed:
            for job, i in batch:
                self._admission.done(job, job.costs[i])
        for (job, i), result in zip(batch, results):  # each request gets exactly its own lines back, in order
            job.results[i] = result
            if all(found is not None for found in job.results):
                job.answer(job.results)

    def _measure(self, rate: float) -> None:
        """A whole batch's work per second. A batch that left lines waiting measures how fast a queue goes (a
        running mean); one that did not (fewer lines, slower per line) only until one that did."""
        if self._left_waiting:
            self.rate = 0.8 * self.rate + 0.2 * rate if self._queue_measured else rate
            self._queue_measured = True
        elif not self._queue_measured:
            self.rate = rate
