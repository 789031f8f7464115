"""How preparing a corpus scales: corpora of N pairs made from the Tatoeba download (two sentence pairs joined into
one, drawn with a seed, so that nothing repeats), each prepared in a fresh process and a fresh cache up to the
first training batch. Printed per size: each stage's seconds (the cache's own log line), the whole, the peak memory
of the process and its workers together (PSS: shared pages counted once) and the cache's size on disk.

    python scripts/benchmark_prepare.py --pairs 100000 500000 2000000
    python scripts/benchmark_prepare.py --pairs 2000000 --corpus my_2M_pairs.tsv   # a corpus of your own
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PREPARE = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(message)s")
from data.datamodule import TranslationDataModule
datamodule = TranslationDataModule(corpus_path=sys.argv[1], cache_dir=sys.argv[2], **eval(sys.argv[3]))
datamodule.setup()
next(iter(datamodule.train_dataloader()))  # the first training batch
"""


def joined_corpus(path: Path, pairs: int, source: Path | None = None, seed: int = 0) -> Path:
    """A TSV of ``pairs`` pairs, each two Tatoeba pairs (``source``, else the download) joined by a space."""
    from data.corpus import locate_corpus
    from data.languages import LanguagePair
    from data.readers import read_pairs

    english_spanish = LanguagePair("en", "es")
    sentences, _ = read_pairs(locate_corpus(source, pair=english_spanish), english_spanish)
    draw = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        out.write("en\tes\n")
        for _ in range(pairs):
            (a, b), (c, d) = draw.choice(sentences), draw.choice(sentences)
            out.write(f"{a} {c}\t{b} {d}\n")
    return path


def tree_memory(pid: int) -> int:
    """The memory of process ``pid`` and every process below it, now: their proportional set sizes (Linux's /proc),
    so that the pages forked workers share with their parent are counted once, not once per worker."""
    total, stack = 0, [pid]
    while stack:
        process = stack.pop()
        try:
            rollup = Path(f"/proc/{process}/smaps_rollup").read_text()
            total += int(re.search(r"^Pss:\s+(\d+) kB", rollup, re.MULTILINE).group(1)) * 1024
            for task in Path(f"/proc/{process}/task").iterdir():
                stack += map(int, (task / "children").read_text().split())
        except (OSError, AttributeError):  # gone meanwhile, or a zombie without memory
            continue
    return total


def prepare(corpus: Path, cache: Path, settings: dict | None = None) -> dict:
    """Prepare ``corpus`` into ``cache`` in a fresh process: seconds in all and per stage, peak memory (``peak_rss``:
    the process tree's PSS), disk bytes."""
    start, peak = time.perf_counter(), 0
    process = subprocess.Popen([sys.executable, "-c", PREPARE, str(corpus), str(cache), repr(settings or {})],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(process.stdout), daemon=True)
    reader.start()
    while process.poll() is None:
        peak = max(peak, tree_memory(process.pid))
        time.sleep(1)  # (reading a large process's smaps_rollup walks its page tables: not too often)
    reader.join()
    seconds = time.perf_counter() - start
    if process.returncode:
        raise RuntimeError(f"preparing {corpus} failed:\n" + "".join(output[-20:]))
    stages = re.search(r"data prepared in [\d.]+ s \((.*)\)", "".join(output))
    return {"seconds": seconds, "stages": stages.group(1) if stages else "", "peak_rss": peak,
            "disk": sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, nargs="+", default=[100_000, 500_000, 2_000_000])
    parser.add_argument("--tatoeba", type=Path, default=None, help="the spa-eng download (default: found as train.py does)")
    parser.add_argument("--corpus", type=Path, default=None, help="prepare this file instead of joined Tatoeba pairs")
    args = parser.parse_args()
    from runtime.machine import machine_name

    print(f"{machine_name()}, {time.strftime('%Y-%m-%d')}")
    print("| pairs | file | prepared, to the first batch | stages | peak memory (PSS, workers too) | cache on disk |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as folder:
        for pairs in args.pairs:
            corpus = args.corpus or joined_corpus(Path(folder) / f"joined-{pairs}.tsv", pairs, args.tatoeba)
            result = prepare(corpus, Path(folder) / f"cache-{pairs}")
            print(f"| {pairs:,} | {corpus.stat().st_size / 1e6:,.0f} MB | {result['seconds']:.0f} s | "
                  f"{result['stages']} | {result['peak_rss'] / 1e9:.2f} GB | {result['disk'] / 1e6:,.0f} MB |",
                  flush=True)
            if args.corpus:
                break


if __name__ == "__main__":
    main()
