"""serving/admission.py: a request is taken only if it can be answered by its deadline at the measured rate, and
only if it leaves every request taken before it in time; the rest are refused with the seconds until there is room."""

from dataclasses import dataclass, field

import pytest

from serving.admission import Admission, Overloaded

RATE = 100.0  # work per second
MARGIN = 0.5  # seconds kept in hand


@dataclass(eq=False)
class Request:
    """What admission reads of a request: its lines, each line's work, its deadline, its work not done."""

    costs: list[int]
    deadline: float
    lines: list[str] = field(default_factory=list)
    unfinished: int = 0

    def __post_init__(self) -> None:
        self.lines, self.unfinished = ["a line"] * len(self.costs), sum(self.costs)


def test_one_line_requests_are_taken_while_the_queue_fits_in_their_deadline():
    admission = Admission(margin=MARGIN, max_work=1000)
    taken = 0
    with pytest.raises(Overloaded) as refused:
        for _ in range(1000):  # all at time 0, each 10 work (0.1 s) due at 10 s
            admission.admit(Request([10], deadline=10.0), RATE, now=0.0)
            taken += 1
    assert taken == 95  # 95 × 0.1 s = 9.5 s = the deadline less the margin
    assert admission.single == 950 and refused.value.retry_after == 1
    assert "950 work comes before it (9.5 s at the measured 100 work/s)" in str(refused.value)


def test_the_retry_time_is_when_the_queue_has_room_for_it():
    admission = Admission(margin=MARGIN, max_work=1000)
    queue = [Request([10], deadline=10.0) for _ in range(95)]
    for request in queue:
        admission.admit(request, RATE, now=0.0)
    with pytest.raises(Overloaded) as refused:
        admission.admit(Request([400], deadline=10.0), RATE, now=0.0)  # 4 s of work: 4 s too late
    assert refused.value.retry_after == 4
    with pytest.raises(Overloaded):  # 3 s later with nothing done (the machine was busy elsewhere): no room yet
        admission.admit(Request([400], deadline=13.0), RATE, now=3.0)
    for request in queue[:40]:  # 4 s of the queue done, as the model loop tells it
        admission.done(request, 10)
    admission.admit(Request([400], deadline=14.0), RATE, now=4.0)


def test_a_short_request_takes_its_turn_beside_a_long_one_not_after_it():
    admission = Admission(margin=MARGIN, max_work=10_000)
    long = Request([100] * 9, deadline=30.0)  # 9 s of work, alone: taken, predicted to end at 9 s
    admission.admit(long, RATE, now=0.0)
    assert admission.turns[long] == pytest.approx(9.0)
    short = Request([10], deadline=1.0)  # due in 1 s: it waits for its share of the long one's work, not all of it
    admission.admit(short, RATE, now=0.0)
    assert admission.turns[long] == pytest.approx(9.1)  # the long one ends later by the short one's work


def test_a_request_that_would_push_one_taken_before_past_its_deadline_is_refused():
    admission = Admission(margin=MARGIN, max_work=10_000)
    long = Request([100] * 9, deadline=9.55)  # predicted to end at 9.0 s, 0.05 s in hand
    admission.admit(long, RATE, now=0.0)
    with pytest.raises(Overloaded) as refused:
        admission.admit(Request([10], deadline=30.0), RATE, now=0.0)  # 0.1 s more for the long one: too late
    assert "make 1 request(s) taken before it miss their deadline" in str(refused.value)
    assert refused.value.retry_after == 9  # when the long one should be done
    admission.admit(Request([4], deadline=30.0), RATE, now=0.0)  # 0.04 s: still in time


def test_a_request_already_late_does_not_block_the_others():
    admission = Admission(margin=MARGIN, max_work=100_000)
    hopeless = Request([1000] * 64, deadline=30.0)  # 640 s of work, taken alone: it will be dropped at 30 s
    admission.admit(hopeless, RATE, now=0.0)
    assert admission.turns[hopeless] == pytest.approx(640.0)  # predicted past its deadline already
    one, three = Request([10], deadline=30.0), Request([10] * 3, deadline=30.0)
    admission.admit(one, RATE, now=0.0)  # no Overloaded: pushing it later costs it nothing it still had
    admission.admit(three, RATE, now=0.0)
    # Both taken, each with only its share of the late one's work before it: in time, well inside 30 s.
    assert admission.single == 10 and admission.turns[three] == pytest.approx(0.7)  # (10 + 30 + 30) / 100
    assert admission.turns[hopeless] == pytest.approx(640.4)  # it alone goes later, by their 0.4 s
    admission.settle(hopeless)  # dropped at its deadline: its work leaves, the others' stays
    assert admission.turns == {three: pytest.approx(0.7)} and admission.single == 10


def test_work_done_or_dropped_makes_room():
    admission = Admission(margin=MARGIN, max_work=1000)
    first, second = Request([500], deadline=20.0), Request([300, 200], deadline=20.0)
    admission.admit(first, RATE, now=0.0)
    admission.admit(second, RATE, now=0.0)
    admission.done(second, 300)  # a line done
    assert second.unfinished == 200 and admission.single == 500
    admission.settle(first)  # answered (or dropped)
    admission.settle(second)
    assert admission.single == 0 and admission.turns == {} and first.unfinished == second.unfinished == 0
    admission.done(first, 500)  # a batch that ends after its request was dropped changes nothing
    assert admission.single == 0


def test_a_call_for_a_translation_already_done_is_always_taken():
    admission = Admission(margin=MARGIN, max_work=1000)
    for _ in range(95):
        admission.admit(Request([10], deadline=10.0), RATE, now=0.0)
    with pytest.raises(Overloaded):
        admission.admit(Request([10], deadline=10.0), RATE, now=0.0)
    call = Request([10], deadline=10.0)
    call.lines = []  # the n-best or attention of a request whose lines are translated
    admission.admit(call, RATE, now=0.0)
    assert admission.single == 960


def test_before_a_rate_is_measured_one_requests_worth_is_taken():
    admission = Admission(margin=MARGIN, max_work=100)
    admission.admit(Request([1000], deadline=1.0), 0.0, now=0.0)  # alone: always taken (max_work bounds it)
    with pytest.raises(Overloaded) as refused:
        admission.admit(Request([10], deadline=1.0), 0.0, now=0.0)
    assert refused.value.retry_after == 1 and "not measured yet" in str(refused.value)
    admission = Admission(margin=MARGIN, max_work=100)
    for _ in range(10):
        admission.admit(Request([10], deadline=1.0), 0.0, now=0.0)
    with pytest.raises(Overloaded):
        admission.admit(Request([10], deadline=1.0), 0.0, now=0.0)
