"""serving/ under a flood, on a real server with a slow model (a larger untrained one): every client at once is
answered within the deadline or refused at once, and the bad requests of scripts/benchmark_server.py (bad types, a
100 MB body, deep nesting, the heaviest request, half-open connections) leave the server as fast as it was,
measured against itself, fresh, in the same test. The flood is sized from the model's speed measured on the spot:
twice what fits in the deadline, on a fast machine or a slow one."""

import statistics
import time

import pytest
import torch

from benchmark_server import flood, replay  # scripts/benchmark_server.py: N clients at once; the bad requests
from helpers import serving
from model.inference.translator import Translator
from model.search import SearchConfig

BEAM = 32  # much work a line: the deadline holds a few hundred lines, which the server reads in a fraction of it
# One thread for the model, here and in the server: beside busy loops, a batch on two threads can stall for
# seconds when one of them is descheduled, which no admission can foresee (a machine slowing under it).
THREADS = "1"


@pytest.fixture(scope="module")
def flood_size(slow_run) -> tuple[float, list[str]]:
    """A deadline of many batches and twice as many one-line requests as the model translates in it, file-to-file,
    on this machine now."""
    translator, sample = Translator.load(slow_run), [f"I have {i + 1} cats." for i in range(32)]
    config, threads = SearchConfig(beam_size=BEAM), torch.get_num_threads()
    torch.set_num_threads(int(THREADS))
    try:
        translator.translate(sample, config)
        start = time.monotonic()
        translator.translate(sample, config)
        seconds = time.monotonic() - start
    finally:
        torch.set_num_threads(threads)
    deadline = max(4.0, 8 * seconds)
    count = int(2 * deadline * len(sample) / seconds)
    return deadline, [f"I have {i + 1} cats." for i in range(min(max(count, 64), 1500))]


def waits(answers, status: int) -> list[float]:
    return [answer.waited for answer in answers if answer.status == status]


def test_a_flood_is_answered_in_time_or_refused_at_once_before_and_after_bad_requests(slow_run, flood_size):
    deadline, lines = flood_size
    with serving(slow_run, f"serve.deadline={deadline:.1f}", "serve.read_time=2", env={"OMP_NUM_THREADS": THREADS}) \
            as (port, ended, process):
        fresh = flood(port, lines, beam_size=BEAM)
        said = replay(port, connections=1000, hold=5.0)
        after = flood(port, lines, beam_size=BEAM)
    for answers in (fresh, after):
        statuses = {answer.status for answer in answers}
        assert statuses == {200, 503}, statuses  # more than fits: some refused; none past its deadline (504)
        assert statistics.median(waits(answers, 503)) < statistics.median(waits(answers, 200))  # refused on arrival
    assert said["100 MB body"] == said["heaviest request"] == 413 and set(said["bad types"]) <= {400, 422}
    assert said["1000 half-open connections, still open after 5 s"] == 0  # closed after serve.read_time
    rate = lambda answers: len(waits(answers, 200)) / max(a.at for a in answers if a.status == 200)  # noqa: E731
    assert len(waits(after, 200)) >= 0.8 * len(waits(fresh, 200)), (len(waits(fresh, 200)), len(waits(after, 200)))
    assert rate(after) >= 0.8 * rate(fresh), (rate(fresh), rate(after))
    assert ended[0] == 130
