"""The translation server against translating the same lines file-to-file — ratios from ONE run, on 127.0.0.1 only.

    python scripts/export_split.py --split test --out /tmp/test
    python scripts/benchmark_server.py outputs/default_run /tmp/test.en          # ~2 minutes on 2 cores
    python scripts/benchmark_server.py outputs/default_run --flood 1000           # ~1 minute on 2 cores

Sentences/s with 1 and with 16 concurrent clients, each sending one sentence per request, as a person
typing does; the server gathers what arrives together into one batch (``serving/server.py``).

``--flood N``: N clients at once, each sending one line ("I have 1 cats.", "I have 2 cats.", …, or the
lines of the file), first to a fresh server, then to the same server after the bad requests of
``scripts/bad_requests.py``: how many were answered, refused (503) and timed out (504), answered lines/s
as a share of file-to-file's, and the time of the answered ones.

File-to-file is ``Translator`` in-process, as ``translate.py input=… output=…`` runs it (start-up excluded,
batches of 64). The run's own search (its ``module.search``) throughout.
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
from datetime import date
from pathlib import Path

from bad_requests import replay  # scripts/bad_requests.py, beside this file

ROOT = Path(__file__).resolve().parent.parent


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
            try:
                post(port, [])
                break
            except OSError:
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


@dataclass
class Answer:
    """One flood client's answer: its status (0: none, the connection failed), when it came (seconds after the
    flood began) and how long the client waited for it."""

    status: int
    at: float
    waited: float


async def ask(port: int, request: dict, began: float, timeout: float) -> Answer:
    """One request to ``POST /translate`` on a connection of its own; status 0 if none came in ``timeout`` s."""
    sent = time.perf_counter()
    body = json.dumps(request).encode()

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


async def flood_async(port: int, requests: list[dict], timeout: float) -> list[Answer]:
    began = time.perf_counter()
    return list(await asyncio.gather(*(ask(port, request, began, timeout) for request in requests)))


def flood(port: int, lines: list[str], timeout: float = 120, **options) -> list[Answer]:
    """Every line sent at once, each by a client of its own (waiting up to ``timeout`` s), with the request's
    ``options`` (e.g. ``beam_size``): their answers, in order."""
    return asyncio.run(flood_async(port, [{"lines": [line], **options} for line in lines], timeout))


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


def file_to_file(run: str, lines: list[str]):
    """Lines/s of ``Translator`` in-process on ``lines`` (batches of 64, after a warm-up); and the search."""
    from model.inference.translator import Translator

    translator = Translator.load(run)
    translator.translate(lines[:64])  # warm-up
    start = time.perf_counter()
    translator.translate(lines, batch_size=64)
    return len(lines) / (time.perf_counter() - start), translator


def benchmark_flood(run: str, lines: list[str], options: list[str]) -> None:
    from runtime.machine import machine_name

    file_rate, translator = file_to_file(run, lines)
    search = translator.settings.search
    del translator  # the server loads its own
    with server(run, *options) as port:
        fresh = flood_summary(flood(port, lines), file_rate)
        time.sleep(2)
        said = replay(port)
        after = flood_summary(flood(port, lines), file_rate)
    print(f"{machine_name()}, {date.today()}: {len(lines)} clients at once, one line each, search {search}")
    print(f"   file-to-file (Translator, batches of 64): {file_rate:.1f} lines/s")
    print(f"   bad requests: {said}")
    print("                         answered  refused  timed out  other  answered/s  share  p50 s   p99 s  "
          "slowest refusal s")
    for name, row in (("fresh server", fresh), ("after bad requests", after)):
        print(f"   {name:<20} {row['answered']:9d} {row['refused']:8d} {row['timed out']:10d} {row['other']:6d} "
              f"{row['answered/s']:11.1f} {row['share']:6.2f} {row['p50']:6.2f} {row['p99']:7.2f} "
              f"{row['slowest refusal']:8.2f}")
    print(f"   answered after / fresh = {after['answered'] / max(fresh['answered'], 1):.2f}")


def benchmark_clients(run: str, sentences: list[str]) -> None:
    from runtime.machine import machine_name

    file_rate, translator = file_to_file(run, sentences)
    # translate.py's length-sorted batches of 64; of 16 (what 16 one-sentence clients can fill at most);
    # and 16 at a time in arrival order, as requests come (lengths mixed: a beam runs to its longest).
    rates = {}
    for name, (chunks, batch_size) in {"sorted 16": ([sentences], 16), "arrival 16": (
            [sentences[i : i + 16] for i in range(0, len(sentences), 16)], 16)}.items():
        start = time.perf_counter()
        for chunk in chunks:
            translator.translate(chunk, batch_size=batch_size)
        rates[name] = len(sentences) / (time.perf_counter() - start)
    search = translator.settings.search
    del translator  # the server loads its own
    with server(run) as port:
        post(port, sentences[:16])  # warm
        one = through_server(port, sentences, 1)
        sixteen = through_server(port, sentences, 16)
    print(f"{machine_name()}, {date.today()}: {len(sentences)} sentences, search {search}, one sentence per request")
    print(f"   file-to-file (Translator, batches of 64)   {file_rate:7.1f} sentences/s   1.00x")
    print(f"   file-to-file, batches of 16                {rates['sorted 16']:7.1f} sentences/s   "
          f"{rates['sorted 16'] / file_rate:.2f}x")
    print(f"   16 at a time in arrival order (unsorted)   {rates['arrival 16']:7.1f} sentences/s   "
          f"{rates['arrival 16'] / file_rate:.2f}x")
    print(f"   server, 1 client                           {one:7.1f} sentences/s   {one / file_rate:.2f}x")
    print(f"   server, 16 concurrent clients              {sixteen:7.1f} sentences/s   {sixteen / file_rate:.2f}x")
    print(f"   16 clients / 1 client = {sixteen / one:.2f}x;  file-to-file / 16 clients = {file_rate / sixteen:.2f}x; "
          f"arrival order / 16 clients = {rates['arrival 16'] / sixteen:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run folder made by train.py")
    parser.add_argument("lines", type=Path, nargs="?",
                        help="source-language sentences, one a line (e.g. scripts/export_split.py's)")
    parser.add_argument("--sentences", type=int, default=400, help="how many of them")
    parser.add_argument("--flood", type=int, metavar="N", help="N clients at once, one line each, fresh and after "
                                                               "the bad requests")
    parser.add_argument("--serve", nargs="*", default=[], metavar="OPTION", help="serve.* options for the server")
    args = parser.parse_args()
    if args.flood:
        lines = ([line for line in args.lines.read_text(encoding="utf-8").splitlines() if line.strip()]
                 if args.lines else [f"I have {i + 1} cats." for i in range(args.flood)])
        benchmark_flood(args.run, (lines * args.flood)[: args.flood], args.serve)
    elif args.lines is None:
        parser.error("the lines to translate are needed (or --flood N)")
    else:
        sentences = [line for line in args.lines.read_text(encoding="utf-8").splitlines() if line.strip()]
        benchmark_clients(args.run, sentences[: args.sentences])


if __name__ == "__main__":
    main()
