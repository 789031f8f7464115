"""serving/batcher.py: requests take turns in model batches, within bounds of time, queue and deadline."""

import asyncio
import threading
import time

import pytest

from model.inference.translator import Translation
from model.search import SearchConfig
from serving.admission import Overloaded
from serving.batcher import Batcher, ServerStopping
from serving.limits import Limits

CONFIG = SearchConfig(beam_size=2)


class Recorder:
    """Stands in for a Translator: records the batches it is given and answers each line with itself, taking
    ``seconds_per_line``, in steps of ``step`` seconds after each of which the lines still ``wanted`` go on."""

    def __init__(self, seconds_per_line: float = 0.0, step: float = 0.01) -> None:
        self.batches: list[list[str]] = []
        self.seconds_per_line, self.step, self.steps, self.returned = seconds_per_line, step, 0, 0

    def translate(self, lines, config, batch_size, keep_rows=None):
        self.batches.append(list(lines))
        end = time.monotonic() + self.seconds_per_line * len(lines)
        while time.monotonic() < end and (keep_rows is None or any(keep_rows())):
            time.sleep(self.step)
            self.steps += 1
        self.returned += 1
        return [Translation(line, line.upper()) for line in lines]


def run_scenario(batcher: Batcher, scenario) -> object:
    """``scenario()`` (a coroutine function) in an event loop while ``batcher.run`` works on a thread."""
    model = threading.Thread(target=batcher.run)
    model.start()
    try:
        return asyncio.run(scenario())
    finally:
        batcher.stop()
        model.join(timeout=10)


def test_a_long_request_takes_turns_with_a_short_one():
    recorder = Recorder()
    batcher = Batcher(recorder, Limits(window=0.2), batch_lines=4, rate=1e9)

    async def scenario():
        later = time.monotonic() + 60
        long = batcher.submit([f"long {i}" for i in range(10)], CONFIG, [1] * 10, later)
        short = batcher.submit(["short"], CONFIG, [1], later)
        return await long.future, await short.future

    long, short = run_scenario(batcher, scenario)
    assert [t.text for t in long] == [f"LONG {i}" for i in range(10)] and short[0].text == "SHORT"
    # The short request's line goes in the very first batch, beside the long one's first lines.
    assert recorder.batches[0] == ["long 0", "short", "long 1", "long 2"]
    assert [len(batch) for batch in recorder.batches] == [4, 4, 3]


def test_a_batch_holds_the_work_of_its_time_at_the_measured_rate_and_a_line_over_it_goes_alone():
    recorder = Recorder(seconds_per_line=0.04)  # 40 work a line: 1000 work/s
    batcher = Batcher(recorder, Limits(window=0.2, batch_time=0.1), batch_lines=16, rate=1000)  # 100 work a batch

    async def scenario():
        later = time.monotonic() + 60
        jobs = [batcher.submit(["a", "b", "c"], CONFIG, [40, 40, 40], later),
                batcher.submit(["huge"], CONFIG, [500], later)]
        return [await job.future for job in jobs]

    run_scenario(batcher, scenario)
    assert recorder.batches == [["a", "b"], ["huge"], ["c"]]  # 80 of 100; then huge, alone, its turn; the rest


def test_before_any_batch_is_measured_a_batch_holds_one_requests_worth():
    recorder = Recorder(seconds_per_line=0.01)
    batcher = Batcher(recorder, Limits(window=0.2, max_work=80), batch_lines=16)

    async def scenario():
        later = time.monotonic() + 60
        return await batcher.submit(["a", "b", "c"], CONFIG, [40, 40, 40], later).future

    run_scenario(batcher, scenario)
    assert recorder.batches == [["a", "b"], ["c"]] and batcher.rate > 0


def test_the_rate_is_measured_on_batches_that_leave_lines_waiting():
    recorder = Recorder(seconds_per_line=0.02)  # 50 lines/s, 1 work a line: a batch of 1 or of 4, the same rate
    batcher = Batcher(recorder, Limits(window=0.01), batch_lines=4)

    async def scenario():
        later = time.monotonic() + 60
        await batcher.submit(["alone"], CONFIG, [1], later).future  # a batch of one: measured until a queue is
        alone = batcher.rate
        recorder.seconds_per_line = 0.005  # the machine is faster with a queue (as batches of many lines are)
        await asyncio.gather(*(batcher.submit([f"queued {i}"], CONFIG, [1], later).future for i in range(12)))
        queued = batcher.rate
        await batcher.submit(["alone again"], CONFIG, [1], later).future
        return alone, queued, batcher.rate

    alone, queued, after = run_scenario(batcher, scenario)
    assert 10 < alone < 60 and queued > 2 * alone  # the queue's batches replaced the lone batch's rate
    assert after == queued  # a lone batch no longer lowers it


def test_a_dropped_request_leaves_the_running_batch_at_its_next_step():
    recorder = Recorder(seconds_per_line=30.0)
    batcher = Batcher(recorder, Limits(window=0.01), rate=1e9)

    async def scenario():
        job = batcher.submit(["long"], CONFIG, [1], time.monotonic() + 60)
        while not recorder.batches:  # the batch runs
            await asyncio.sleep(0.01)
        start = time.monotonic()
        job.future.cancel()  # its client left
        while not recorder.returned:
            await asyncio.sleep(0.01)
        return time.monotonic() - start

    assert run_scenario(batcher, scenario) < 5  # not the 30 s its line would have taken


def test_a_flood_is_taken_as_far_as_it_can_be_answered_in_time_and_the_rest_refused_at_once():
    recorder = Recorder(seconds_per_line=0.01, step=0.002)  # ~100 lines/s at one work a line
    batcher = Batcher(recorder, Limits(window=0.01, batch_time=0.1, deadline=1.0), batch_lines=4)

    async def scenario():
        later = time.monotonic() + 60
        await asyncio.gather(*(batcher.submit([f"warm {i}"], CONFIG, [1], later).future for i in range(20)))
        rate, later = batcher.rate, time.monotonic() + 1.0
        jobs, refused = [], []
        for i in range(300):
            try:
                jobs.append(batcher.submit([f"line {i}"], CONFIG, [1], later))
            except Overloaded as error:
                refused.append(error)
        answers = await asyncio.wait_for(asyncio.gather(*(job.future for job in jobs)), timeout=30)
        return rate, len(jobs), refused, time.monotonic() - later, answers

    rate, taken, refused, late, answers = run_scenario(batcher, scenario)
    assert 0.3 * rate <= taken <= 0.9 * rate + 2 and len(refused) == 300 - taken  # at most what fits: 1 s less 0.1
    assert late < 0 and len(answers) == taken, late  # every request taken was answered before its deadline
    assert all(error.retry_after >= 1 and "\n" not in str(error) for error in refused)


def test_a_request_past_its_deadline_is_dropped_unread():
    recorder = Recorder()
    batcher = Batcher(recorder, Limits(window=0.2))

    async def scenario():
        batcher.submit(["too late"], CONFIG, [1], time.monotonic() - 1)
        job = batcher.submit(["in time"], CONFIG, [1], time.monotonic() + 60)
        return await job.future

    assert run_scenario(batcher, scenario)[0].text == "IN TIME"
    assert recorder.batches == [["in time"]]


def test_stopping_answers_what_waits_and_refuses_what_comes():
    batcher = Batcher(Recorder())

    async def scenario():
        waiting = batcher.submit(["a"], CONFIG, [1], time.monotonic() + 60)
        batcher.stop()
        with pytest.raises(ServerStopping):
            await waiting.future
        with pytest.raises(ServerStopping):
            batcher.submit(["b"], CONFIG, [1], time.monotonic() + 60)

    asyncio.run(scenario())
