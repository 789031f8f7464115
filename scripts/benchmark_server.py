"""The translation server under load, on 127.0.0.1 only: against file-to-file, flooded, sent bad requests; ONE run.

    python scripts/export_split.py --split test --out /tmp/test
    python scripts/benchmark_server.py outputs/default_run /tmp/test.en          # ~2 minutes on 2 cores
    python scripts/benchmark_server.py outputs/default_run --flood 1000           # ~1 minute on 2 cores
    python scripts/benchmark_server.py --bad-requests 8000     # against translate.py run=… serve=true port=8000

Sentences/s with 1 and with 16 concurrent clients, each sending one sentence a request, as a person typing does.
``--flood N``: N clients at once, one line each ("I have 1 cats.", …, or the file's lines), to a fresh server, then
after the bad requests: answered, refused (503), timed out (504), answered lines/s against file-to-file's
(``Translator`` in-process, batches of 64, as ``translate.py input=… output=…``), and the answered ones' waits.
The bad requests, a replayable sequence: bad types and bodies, a 100 MB body, a deeply nested body, the heaviest
request and many half-open connections (held a while, then dropped); ``tests/test_server_flood.py`` replays it too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmark import ROOT, header  # scripts/benchmark.py
from benchmark_run import lines_per_s  # scripts/benchmark_run.py


BAD_BODIES = [b"{not json", b'{"lines": "one line"}', b'{"lines": [1, 2]}', b'{"lines": ["Hi."], "beam_size": 0}',
              b'{"lines": ["Hi."], "beam_size": "5"}', b'{"lines": ["Hi."], "file": "/etc/passwd"}',
              b'{"lines": null}', b"[]", b'"lines"', b"", json.dumps({"lines": ["Hi."] * 65}).encode()]
HEAVIEST = {"lines": ["Tom said that Mary thought " * 80] * 64, "beam_size": 64, "n_best": True, "attention": True}


@dataclass
class Answer:
    """One client's answer: its status (0: none came), when (s after ``began``), how long it waited."""

    status: int
    at: float
    waited: float


async def ask(port: int, body: bytes, began: float, timeout: float = 60) -> Answer:
    """``POST /translate`` with ``body`` on a connection of its own; status 0 if none came in ``timeout`` s."""
    sent = time.perf_counter()

    async def exchange() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (port, len(body), body))
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.read()
            return int(head.split(None, 2)[1])
        finally:
            writer.close()

    try:
        status = await asyncio.wait_for(exchange(), timeout)
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError):
        status = 0
    done = time.perf_counter()
    return Answer(status, done - began, done - sent)


def status_of(port: int, body: bytes) -> int:
    """POST /translate with ``body``: the status answered (0: none)."""
    return asyncio.run(ask(port, body, time.perf_counter())).status


def huge_body(port: int, megabytes: int = 100) -> int | None:
    """A body declared and sent at ``megabytes`` MB: the status answered (None if the server only closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {megabytes * 1_000_000}\r\n\r\n".encode())
        chunk = b"x" * 1_000_000
        try:
            for _ in range(megabytes):
                connection.sendall(chunk)
        except OSError:  # the server answered and closed: the rest is never read
            pass
        try:
            answer = connection.recv(64)
        except OSError:
            return None
        return int(answer.split()[1]) if answer.startswith(b"HTTP/1.1") else None


def half_open(port: int, count: int, hold: float) -> int:
    """``count`` connections that begin a request and never finish it (half of them in the headers, half in the
    body), held ``hold`` seconds, then dropped: how many the server had accepted and still held open."""
    connections = []
    for i in range(count):
        connection = socket.create_connection(("127.0.0.1", port), timeout=30)
        begun = f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        connection.sendall((begun if i % 2 else begun + 'Content-Length: 100\r\n\r\n{"lines": ["').encode())
        connections.append(connection)
    time.sleep(hold)
    still_open = 0
    for connection in connections:
        connection.setblocking(False)
        try:
            connection.recv(65536)  # b"": the server closed it; an answer (408): it answered and closed
        except BlockingIOError:  # nothing from the server: it still holds the connection
            still_open += 1
        except OSError:  # reset: closed
            pass
        connection.close()
    return still_open


def replay(port: int, connections: int = 2000, hold: float = 2.0) -> dict[str, object]:
    """The whole sequence, in order: what each part was answered."""
    said: dict[str, object] = {}
    said["bad types"] = dict(Counter(status_of(port, body) for body in BAD_BODIES))
    said["100 MB body"] = huge_body(port)
    said["deep nesting"] = status_of(port, b'{"lines": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    said["heaviest request"] = status_of(port, json.dumps(HEAVIEST).encode())
    said[f"{connections} half-open connections, still open after {hold:g} s"] = half_open(port, connections, hold)
    return said

def post(port: int, lines: list[str]) -> list[str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/translate", data=json.dumps({"lines": lines}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    return json.loads(urllib.request.urlopen(request, timeout=300).read())["translations"]


@contextlib.contextmanager
def server(run: str, *options: str):
    """``translate.py run=RUN serve=true`` on a free port, once it answers (nothing translated yet); Ctrl-C after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, str(ROOT / "translate.py"), f"run={run}", "serve=true",
                                f"port={port}", *options], cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if status_of(port, b'{"lines": []}') == 200:  # 0: nothing answers yet; an error: not ready either
                break
            time.sleep(0.2)
        yield port
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)


def through_server(port: int, sentences: list[str], clients: int) -> float:
    """Sentences/s with ``clients`` clients, each sending one sentence a request, one request at a time."""
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda sentence: post(port, [sentence]), sentences))
    return len(sentences) / (time.perf_counter() - start)


def flood(port: int, lines: list[str], timeout: float = 120, **options) -> list[Answer]:
    """Every line sent at once, each by a client of its own (waiting up to ``timeout`` s), with the request's
    ``options`` (e.g. ``beam_size``): their answers, in order."""
    async def everyone() -> list[Answer]:
        bodies = [json.dumps({"lines": [line], **options}).encode() for line in lines]
        began = time.perf_counter()
        return list(await asyncio.gather(*(ask(port, body, began, timeout) for body in bodies)))

    return asyncio.run(everyone())


def flood_summary(answers: list[Answer], file_rate: float) -> dict[str, float]:
    """Answered, refused, timed out, the rest; answered lines/s (over the time until the last answer) and its share
    of file-to-file; the answered ones' p50 and p99 wait; the slowest refusal."""
    statuses = Counter(answer.status for answer in answers)
    answered = sorted(answer.waited for answer in answers if answer.status == 200)
    last = max((answer.at for answer in answers if answer.status == 200), default=0.0)
    rate = len(answered) / last if last else 0.0
    quantile = lambda q: answered[min(len(answered) - 1, int(q * len(answered)))] if answered else 0.0  # noqa: E731
    return {"answered": statuses[200], "refused": statuses[503], "timed out": statuses[504],
            "other": len(answers) - statuses[200] - statuses[503] - statuses[504], "answered/s": rate,
            "share": rate / file_rate, "p50": quantile(0.5), "p99": quantile(0.99),
            "slowest refusal": max((a.waited for a in answers if a.status == 503), default=0.0)}


FILE_TO_FILE = "file-to-file (Translator, batches of 64)"


def file_to_file(run: str, lines: list[str], also_16: bool = False) -> tuple[dict[str, float], object]:
    """Lines/s of ``Translator`` in-process on ``lines``, after a warm-up, and the run's search. Batches of 64, as
    translate.py's; ``also_16``: of 16 (what 16 one-sentence clients can fill at most), length-sorted and in arrival
    order, as requests come (lengths mixed: a beam runs to its longest)."""
    from model.inference.translator import Translator

    translator = Translator.load(run)

    def in_arrival_order(chunk: list[str]) -> None:
        for i in range(0, len(chunk), 16):
            translator.translate(chunk[i : i + 16], batch_size=16)

    runs = {FILE_TO_FILE: lambda chunk: translator.translate(chunk, batch_size=64)}
    if also_16:
        runs |= {"file-to-file, batches of 16": lambda chunk: translator.translate(chunk, batch_size=16),
                 "16 at a time in arrival order (unsorted)": in_arrival_order}
    return {name: lines_per_s(translate, lines)[0] for name, translate in runs.items()}, translator.settings.search


def benchmark_flood(run: str, lines: list[str], options: list[str], connections: int) -> None:
    rates, search = file_to_file(run, lines)  # the server loads its own
    file_rate = rates[FILE_TO_FILE]
    with server(run, *options) as port:
        fresh = flood_summary(flood(port, lines), file_rate)
        time.sleep(2)
        said = replay(port, connections)
        after = flood_summary(flood(port, lines), file_rate)
    print(f"{header()}: {len(lines)} clients at once, one line each, search {search}")
    print(f"   {FILE_TO_FILE}: {file_rate:.1f} lines/s")
    print(f"   bad requests: {said}")
    print("                         answered  refused  timed out  other  answered/s  share  p50 s   p99 s  "
          "slowest refusal s")
    for name, row in (("fresh server", fresh), ("after bad requests", after)):
        print(f"   {name:<20} {row['answered']:9d} {row['refused']:8d} {row['timed out']:10d} {row['other']:6d} "
              f"{row['answered/s']:11.1f} {row['share']:6.2f} {row['p50']:6.2f} {row['p99']:7.2f} "
              f"{row['slowest refusal']:8.2f}")
    print(f"   answered after / fresh = {after['answered'] / max(fresh['answered'], 1):.2f}")


def benchmark_clients(run: str, sentences: list[str]) -> None:
    rates, search = file_to_file(run, sentences, also_16=True)  # the server loads its own
    with server(run) as port:
        post(port, sentences[:16])  # warm
        rates["server, 1 client"] = through_server(port, sentences, 1)
        rates["server, 16 concurrent clients"] = through_server(port, sentences, 16)
    print(f"{header()}: {len(sentences)} sentences, search {search}, one sentence per request")
    file_rate, one, sixteen = rates[FILE_TO_FILE], rates["server, 1 client"], rates["server, 16 concurrent clients"]
    for name, rate in rates.items():
        print(f"   {name:40s}   {rate:7.1f} sentences/s   {rate / file_rate:.2f}x")
    print(f"   16 clients / 1 client = {sixteen / one:.2f}x;  file-to-file / 16 clients = {file_rate / sixteen:.2f}x; "
          f"arrival order / 16 clients = {rates['16 at a time in arrival order (unsorted)'] / sixteen:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", nargs="?", help="a run folder made by train.py")
    parser.add_argument("lines", type=Path, nargs="?",
                        help="source-language sentences, one a line (e.g. scripts/export_split.py's)")
    parser.add_argument("--sentences", type=int, default=400, help="how many of them")
    parser.add_argument("--flood", type=int, metavar="N", help="N clients at once, one line each, fresh and after "
                                                               "the bad requests")
    parser.add_argument("--serve", nargs="*", default=[], metavar="OPTION", help="serve.* options for the server")
    parser.add_argument("--bad-requests", type=int, metavar="PORT", help="only replay the bad requests against a "
                        "server already running on PORT")
    parser.add_argument("--connections", type=int, default=2000, help="half-open connections of the bad requests")
    args = parser.parse_args()
    if args.bad_requests:
        for part, answer in replay(args.bad_requests, args.connections).items():
            print(f"{part}: {answer}")
        return
    if args.run is None or (not args.flood and args.lines is None):
        parser.error("a run and the lines to translate are needed (or --flood N, or --bad-requests PORT)")
    lines = [line for line in args.lines.read_text(encoding="utf-8").splitlines() if line.strip()] if args.lines else []
    if args.flood:
        lines = lines or [f"I have {i + 1} cats." for i in range(args.flood)]
        benchmark_flood(args.run, (lines * args.flood)[: args.flood], args.serve, args.connections)
    else:
        benchmark_clients(args.run, lines[: args.sentences])


if __name__ == "__main__":
    main()
