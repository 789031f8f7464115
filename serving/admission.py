"""Which requests the server takes: those it can answer by their deadline at the rate it measures, without
making one it took already miss its own. The rest are refused at once, with the seconds until there is room.

A new request waits for the one-line requests taken before it and, for each request taking turns (``batcher.py``),
for as much of that one's work as its own; it makes each of those later by its own work, at most. A quarter of the
deadline (at least one batch's time) is kept in hand: for a line whose turn comes a batch late, a rate measured a
little high, and the processor time a flood takes from the model (docs/results.md, "A flood").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from serving.batcher import Job


class Overloaded(RuntimeError):
    """The server cannot answer this request in time now; ``retry_after``: seconds until it likely can."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class Admission:
    """The work taken and not done yet: one-line requests' as a sum, each request taking turns with its predicted
    end. Kept under the batcher's lock."""

    margin: float  # seconds kept in hand before a deadline
    max_work: int  # before any rate is measured: the work taken at once (one request's worth)
    single: int = 0  # unfinished work of one-line requests (and calls on the model): served in arrival order
    turns: dict[Job, float] = field(default_factory=dict)  # requests of several lines: their predicted end

    def admit(self, job: Job, rate: float, now: float) -> None:
        """Take ``job``, or refuse it (``Overloaded``) when it cannot be answered in time at ``rate`` (work per
        second; 0: not measured yet)."""
        own = sum(job.costs)
        if not job.lines:  # a call for a translation already done (n-best, attention), or nothing: always taken
            self.single += own
            return
        if refused := self.refusal(own, job.deadline, rate, now):
            raise refused
        for other in self.turns:  # this request's lines take turns before the rest of theirs
            self.turns[other] += min(own, other.unfinished) / rate if rate else 0.0
        if len(job.lines) > 1:
            before = self.single + sum(min(other.unfinished, own) for other in self.turns)
            self.turns[job] = now + (before + own) / rate if rate else math.inf
        else:
            self.single += own

    def refusal(self, own: int, deadline: float, rate: float, now: float) -> Overloaded | None:
        """Why a request of ``own`` work, due ``deadline``, cannot be taken now, with the seconds until it likely can
        (None: it can)."""
        taken = self.single + sum(other.unfinished for other in self.turns)
        if not taken:
            return None  # alone, a request is always taken (serve.max_work bounds it)
        if not rate:
            return None if taken + own <= self.max_work else Overloaded(
                f"the server is busy: {taken} work waits and its speed is not measured yet; try again in 1 s", 1)
        before = self.single + sum(min(other.unfinished, own) for other in self.turns)
        late = now + (before + own) / rate - (deadline - self.margin)
        # Each request taking turns that is still predicted in time must stay so.
        pushed = [end - now for other, end in self.turns.items()
                  if end <= other.deadline - self.margin < end + min(own, other.unfinished) / rate]
        if late <= 0 and not pushed:
            return None
        retry = max(1, math.ceil(max([late, *pushed])))
        reason = (f"{before} work comes before it ({before / rate:.1f} s at the measured {rate:.0f} work/s)"
                  if late > 0 else f"it would make {len(pushed)} request(s) taken before it miss their deadline")
        return Overloaded(f"the server is busy: {reason}, so this request's {own} work would not be answered in "
                          f"time; try again in {retry} s", retry)

    def done(self, job: Job, work: int) -> None:
        """``work`` of ``job`` was done (or dropped)."""
        work = min(work, job.unfinished)
        job.unfinished -= work
        if job not in self.turns:
            self.single -= work

    def settle(self, job: Job) -> None:
        """``job`` is answered, failed or dropped: none of its work waits any more."""
        self.done(job, job.unfinished)
        self.turns.pop(job, None)
