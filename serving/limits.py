"""What one request may cost and how long it may take: the server's limits, written once.

``translate.py`` makes its ``serve.*`` options and their ``--help`` lines from these fields (their
metadata: a metavar and a help text). Work is source tokens × beam width (plus a request's n-best and
attention); a model batch is bounded in seconds, at the work rate the server measures as it runs, so a
short request's turn comes within a batch or two on a slow laptop as on a fast server. Imports nothing heavy: the options are
checked before the model loads.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from serving.options import option  # a limit's default and its --help text (translate.py shows them)


@dataclass
class Limits:
    """The ``serve.*`` options: every request's work, a batch's time, the deadline, the body, the time to send it."""

    max_work: int = option(8192, "N", "source tokens x beam_size of a request (+ n_best); more: 413")
    batch_time: float = option(0.5, "S", "seconds of a model batch: long requests take turns")
    deadline: float = option(30.0, "S", "seconds a request may wait and run: refused at once (503 with "
                                        "Retry-After) if it cannot be answered in them; past them: 504")
    max_body: int = option(1_000_000, "N", "bytes of a request's body, bounded before it is read")
    read_time: float = option(10.0, "S", "seconds a client may take to send a request's head, and its body; "
                                         "slower: closed")
    window: float = option(0.01, "S", "seconds a batch with room waits for more lines")

    def __post_init__(self) -> None:
        small = [f"serve.{f.name}={getattr(self, f.name)}" for f in fields(Limits) if getattr(self, f.name) <= 0]
        if small:
            raise ValueError(f"{', '.join(small)}: must be above 0")
