"""What one request may cost and how long it may take: the server's limits, written once.

``translate.py`` makes its ``serve.*`` options and their ``--help`` lines from these fields (their
metadata: a metavar and a help text). Work is source tokens × beam width (plus a request's n-best and
attention); a model batch is bounded in seconds, at the work rate the server measures as it runs, so a
short request's turn comes within a batch or two on a slow laptop as on a fast server. Imports nothing heavy: the options are
checked before the model loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields


def limit(default, metavar: str, help: str):  # noqa: A002 — the --help text
    """A limit's default and its ``--help`` text, as plain dataclass metadata (``translate.py`` shows them)."""
    return field(default=default, metadata={"metavar": metavar, "help": help})


@dataclass
class Limits:
    """The ``serve.*`` options: every request's work, a batch's time, the queue, the deadline, the body."""

    max_work: int = limit(8192, "N", "source tokens x beam_size of a request (+ n_best); more: 413")
    batch_time: float = limit(0.5, "S", "seconds of a model batch: long requests take turns")
    queue_work: int = limit(65536, "N", "work waiting at once; more: 503 with Retry-After")
    deadline: float = limit(30.0, "S", "seconds a request may wait and run; later: 504, work dropped")
    max_body: int = limit(1_000_000, "N", "bytes of a request's body, bounded before it is read")
    window: float = limit(0.01, "S", "seconds a batch with room waits for more lines")

    def __post_init__(self) -> None:
        small = [f"serve.{f.name}={getattr(self, f.name)}" for f in fields(Limits) if getattr(self, f.name) <= 0]
        if small:
            raise ValueError(f"{', '.join(small)}: must be above 0")
        if self.max_work > self.queue_work:
            raise ValueError(f"serve.max_work={self.max_work} is above serve.queue_work={self.queue_work}: "
                             f"such a request could never be queued")
