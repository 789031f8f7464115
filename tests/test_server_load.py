"""serving/server.py's promises with a slow model (a larger untrained one), in units of one model batch measured
on the spot: a short request's turn within a long one's work, a client that leaves or a deadline that passes frees
its work, a flood gets 503 and everyone an answer, a signal stops it within seconds."""

import json
import os
import select
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import call, post, resident_kib, serving
from model.inference.translator import Translator
from model.search import SearchConfig


LONG = {"lines": [("Tom said that Mary thought that John knew that " * 40)[:2000]] * 64, "beam_size": 64}


@pytest.fixture(scope="module")
def batch(slow_run) -> float:
    """Seconds of one model batch of LONG (one line: its work is more than serve.batch_time's) on this machine, now,
    under whatever else it runs: the unit of the server's promises below (the second of two runs)."""
    translator, config = Translator.load(slow_run), SearchConfig(beam_size=LONG["beam_size"])
    translator.translate(LONG["lines"][:1], config)
    start = time.monotonic()
    translator.translate(LONG["lines"][:1], config)
    return time.monotonic() - start


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_within(pid: int, seconds: float, window: float) -> bool:
    """Whether the process uses under a third of a core over some ``window`` seconds, within ``seconds``
    (a busy loop beside it does not count: this is the process's own CPU time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        busy = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - busy < window / 3:
            return True
    return False


def test_short_requests_pass_long_work_and_a_client_that_leaves_frees_its_work(slow_run, batch):
    with serving(slow_run, "serve.max_work=1000000") as (port, ended, process):
        body = json.dumps(LONG).encode()
        leaving = socket.create_connection(("127.0.0.1", port))
        leaving.sendall(f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n".encode() + body)  # 64 batches of work
        time.sleep(max(1.0, 2 * batch))
        assert post(port, {"lines": ["I like cats."]}, timeout=30 + 10 * batch)["translations"][0]
        # Its turn came while the long work goes on (~64 batches; a time bound would depend on the CPU's load).
        done = select.select([leaving], [], [], 0)[0] and leaving.recv(12, socket.MSG_PEEK) == b"HTTP/1.1 200"
        assert not done, "the short request waited for the long one"
        leaving.close()  # the client leaves: its remaining ~60 batches are dropped, the running one ends
        assert idle_within(process.pid, 10 * batch + 5, max(1.0, batch))  # idle long before 60 batches
    assert ended[0] == 130 and b"Traceback" not in ended[2], ended[2].decode()


def test_a_request_past_its_deadline_gets_504_and_its_work_is_dropped(slow_run, batch):
    with serving(slow_run, "serve.max_work=1000000", "serve.deadline=1") as (
            port, ended, process):
        start = time.monotonic()
        status, _, body = call(port, "POST", "/translate", LONG, timeout=30 + 10 * batch)  # 64 batches of work
        assert status == 504 and "serve.deadline=1 s" in json.loads(body)["error"]
        assert time.monotonic() - start < 2 + batch  # answered at the deadline, not when the work would end
        assert idle_within(process.pid, 10 * batch + 5, max(1.0, batch))  # the rest of its lines dropped
    assert ended[0] == 130


def test_a_flood_of_many_line_requests_gets_503_at_once_and_every_client_an_answer(slow_run, batch):
    request = {"lines": [f"Sentence number {i} is not short at all, my friend." for i in range(16)], "beam_size": 5}
    deadline = f"serve.deadline={max(1.0, 2 * batch):.1f}"  # 48 such requests at once are many times what fits
    with serving(slow_run, deadline) as (port, ended, process):
        with ThreadPoolExecutor(48) as pool:
            list(pool.map(lambda _: call(port, "POST", "/translate", request), range(4)))  # warm
            memory = resident_kib(process.pid)
            answers = list(pool.map(lambda _: call(port, "POST", "/translate", request, timeout=60), range(48)))
        statuses = {status for status, _, _ in answers}
        assert statuses <= {200, 503, 504} and 503 in statuses, statuses  # every client an answer or a status
        busy = [headers for status, headers, _ in answers if status == 503]
        assert all(int(headers["retry-after"]) >= 1 for headers in busy)
        assert all("\n" not in json.loads(body)["error"] for status, _, body in answers if status != 200)
        assert post(port, {"lines": ["I like cats."]}, timeout=30 + 10 * batch)["translations"][0]  # within its deadline
        assert resident_kib(process.pid) < 1.25 * memory
    assert ended[0] == 130


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_a_batch_runs_stops_within_two_seconds(slow_run, signum, code, batch):
    with serving(slow_run, "serve.max_work=1000000") as (port, ended, process):
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(call, port, "POST", "/translate", LONG, None, 30)
            time.sleep(1.5)
            start = time.monotonic()
            process.send_signal(signum)
            process.wait(timeout=10)
            stopped = time.monotonic() - start
            try:
                status = waiting.result(timeout=10)[0]
            except OSError:  # the connection closed with the server
                status = None
    assert ended[0] == code and stopped < max(2.0, 2 * batch), (ended[0], stopped)
    assert b"Traceback" not in ended[2] and b"stopped serving" in ended[1], ended[2].decode()
    assert status in (503, None)
