"""Sentences/s through the translation server, with 1 and with 16 concurrent clients, against
translating the same lines file-to-file — ratios from ONE run, on 127.0.0.1 only.

    python scripts/export_split.py --split test --out /tmp/test
    python scripts/benchmark_server.py outputs/default_run /tmp/test.en          # ~2 minutes on 2 cores

Each client sends one sentence per request, as a person typing does; the server gathers what
arrives together into one batch (``serving/server.py``). File-to-file is ``Translator``
in-process, as ``translate.py input=… output=…`` runs it (start-up excluded). The run's own search
(its ``module.search``) throughout.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def post(port: int, lines: list[str]) -> list[str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/translate", data=json.dumps({"lines": lines}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    return json.loads(urllib.request.urlopen(request, timeout=300).read())["translations"]


def through_server(port: int, sentences: list[str], clients: int) -> float:
    """Sentences/s with ``clients`` clients, each sending one sentence a request, one request at a time."""
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda sentence: post(port, [sentence]), sentences))
    return len(sentences) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run folder made by train.py")
    parser.add_argument("lines", type=Path, help="source-language sentences, one a line (e.g. scripts/export_split.py's)")
    parser.add_argument("--sentences", type=int, default=400, help="how many of them")
    args = parser.parse_args()
    sentences = [line for line in args.lines.read_text(encoding="utf-8").splitlines() if line.strip()]
    sentences = sentences[: args.sentences]

    from model.inference.translator import Translator
    from runtime.precision import machine_name

    translator = Translator.load(args.run)
    translator.translate(sentences[:64])  # warm-up
    # translate.py's length-sorted batches of 64; of 16 (what 16 one-sentence clients can fill at most);
    # and 16 at a time in arrival order, as requests come (lengths mixed: a beam runs to its longest).
    runs = {"sorted 64": ([sentences], 64), "sorted 16": ([sentences], 16),
            "arrival 16": ([sentences[i : i + 16] for i in range(0, len(sentences), 16)], 16)}
    rates = {}
    for name, (chunks, batch_size) in runs.items():
        start = time.perf_counter()
        for chunk in chunks:
            translator.translate(chunk, batch_size=batch_size)
        rates[name] = len(sentences) / (time.perf_counter() - start)
    file_rate, search = rates["sorted 64"], translator.settings.search
    del translator  # the server loads its own

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(ROOT / "translate.py"), f"run={args.run}", "serve=true",
                               f"port={port}"], cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                post(port, sentences[:16])  # ready, and warm
                break
            except OSError:
                time.sleep(0.2)
        one = through_server(port, sentences, 1)
        sixteen = through_server(port, sentences, 16)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
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


if __name__ == "__main__":
    main()
