"""Our PyTorch search against CTranslate2 on the same weights (float32 and int8): sentences/s, BLEU, and
how many outputs are identical to ours — from ONE run.

    python scripts/export_split.py --split test --out /tmp/test
    python scripts/benchmark_ctranslate2.py outputs/default_run /tmp/test.en /tmp/test.refs.jsonl

Each engine translates the whole file in batches of 64 with the run's length limits, greedy and
with beam 5 (the run's length penalty; CTranslate2's formula differs, see translate.py --help).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from model.inference.ctranslate2_engine import CTranslate2Engine
from model.inference.export import export_ctranslate2
from model.inference.translator import Translator
from model.training.metrics import corpus_scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run folder made by train.py")
    parser.add_argument("lines", type=Path, help="English sentences, one a line")
    parser.add_argument("refs", type=Path, help="their references, one JSON list a line (scripts/export_split.py)")
    args = parser.parse_args()
    lines = args.lines.read_text(encoding="utf-8").splitlines()
    refs = [json.loads(line) for line in args.refs.read_text(encoding="utf-8").splitlines()]
    ours = Translator.load(args.run)
    folder = Path(args.run) / "ctranslate2"
    engines = {"ours (PyTorch fp32)": ours,
               "CTranslate2 float32": CTranslate2Engine.load(args.run, compute_type="float32"),
               "CTranslate2 int8": CTranslate2Engine(ours, export_ctranslate2(args.run, folder.with_name("ctranslate2_int8"),
                                                                            "int8"), compute_type="int8")}
    print(f"{len(lines)} sentences, batches of 64; identical = the same output ids as ours")
    print(f"{'engine':22} {'search':7} {'sentences/s':>12} {'vs ours':>8} {'BLEU':>6} {'identical':>10}")
    for beam_size in (1, 5):
        config = ours.settings.search.__class__(**{**ours.settings.search.__dict__, "beam_size": beam_size})
        reference = None
        for name, engine in engines.items():
            engine.translate(lines[:64], config)  # warm-up
            start = time.perf_counter()
            results = engine.translate(lines, config)
            rate = len(lines) / (time.perf_counter() - start)
            reference = reference or (results, rate)
            same = sum(a.output_ids == b.output_ids for a, b in zip(results, reference[0]))
            bleu = corpus_scores([t.text for t in results], refs).bleu
            search = "greedy" if beam_size == 1 else f"beam {beam_size}"
            print(f"{name:22} {search:7} {rate:12.1f} {rate / reference[1]:7.2f}x {bleu:6.2f} "
                  f"{same / len(lines):9.1%}")


if __name__ == "__main__":
    main()
