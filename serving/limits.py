"""What one request may cost and how long it may take: the server's limits, written once.

``translate.py`` makes its options, ``serve.*`` among them, and their ``--help`` lines from fields like
these (``option``). Work is source tokens × beam width (plus a request's n-best and attention); a model
batch is bounded in seconds, at the work rate the server measures as it runs, so a short request's turn
comes within a batch or two on a slow laptop as on a fast server. Imports nothing heavy: the options are
checked before the model loads.
"""

from __future__ import annotations

import textwrap
from dataclasses import MISSING, dataclass, field, fields


def option(default, metavar: str, help: str, shown: str | None = None):  # noqa: A002 — the --help text
    """A command-line option: its default, its ``--help`` text and how its default is ``shown`` there (else
    the default itself)."""
    return field(default=default, metadata={"metavar": metavar, "help": help, "shown": shown})


@dataclass
class Limits:
    """The ``serve.*`` options: every request's work, a batch's time, the queue, the deadline, the body."""

    max_work: int = option(8192, "N", "source tokens x beam_size of a request (+ n_best); more: 413")
    batch_time: float = option(0.5, "S", "seconds of a model batch: long requests take turns")
    queue_work: int = option(65536, "N", "work waiting at once; more: 503 with Retry-After")
    deadline: float = option(30.0, "S", "seconds a request may wait and run; later: 504, work dropped")
    max_body: int = option(1_000_000, "N", "bytes of a request's body, bounded before it is read")
    window: float = option(0.01, "S", "seconds a batch with room waits for more lines")

    def __post_init__(self) -> None:
        small = [f"serve.{f.name}={getattr(self, f.name)}" for f in fields(Limits) if getattr(self, f.name) <= 0]
        if small:
            raise ValueError(f"{', '.join(small)}: must be above 0")
        if self.max_work > self.queue_work:
            raise ValueError(f"serve.max_work={self.max_work} is above serve.queue_work={self.queue_work}: "
                             f"such a request could never be queued")


def options_help(options: type, prefix: str = "", option_width: int = 20, help_width: int = 63) -> str:
    """One ``--help`` line per field of ``options`` that is an ``option``, its default in brackets at the end."""
    lines = []
    for f in fields(options):
        if "help" not in f.metadata:
            continue
        first, *more = textwrap.wrap(f.metadata["help"], help_width - 1, break_on_hyphens=False) or [""]
        default = f.default if f.default is not MISSING else f.default_factory()
        shown = f.metadata["shown"] or (f"{default:.12g}" if isinstance(default, float) else str(default).lower())
        lines.append(f"  {prefix + f.name + '=' + f.metadata['metavar']:<{option_width}}{first:<{help_width}}[{shown}]")
        lines += [" " * (option_width + 2) + line for line in more]
    return "\n".join(lines)
