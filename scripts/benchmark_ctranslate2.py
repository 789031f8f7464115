"""Our PyTorch search against CTranslate2 (float32 and int8) and `transformers`' generate() on the same
weights: sentences/s, BLEU, and how many outputs are identical to ours — from ONE run.

    python scripts/export_split.py --split test --out /tmp/test
    python scripts/benchmark_ctranslate2.py outputs/default_run /tmp/test.en /tmp/test.refs.jsonl [--ids ours.json]

Each engine translates the whole file in batches of 64 with the run's length limits, greedy and
with beam 5 (the run's length penalty; theirs is another formula, see translate.py --help). An engine
whose package is missing is left out, with one line saying so.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

import torch

from model.inference.translator import Translation, Translator
from model.training.metrics import corpus_scores
from runtime.machine import machine_name


def output_ids(translation: Translation) -> list[list[int]]:
    """The ids the search produced for each sentence of a line."""
    return [sentence.output_ids for sentence in translation.sentences]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run folder made by train.py")
    parser.add_argument("lines", type=Path, help="source-language sentences, one a line")
    parser.add_argument("refs", type=Path, help="their references, one JSON list a line (scripts/export_split.py)")
    parser.add_argument("--ids", type=Path, help="our output ids as JSON: compared with if the file exists, else "
                        "written (the same outputs before and after a change to the search)")
    args = parser.parse_args()
    lines = args.lines.read_text(encoding="utf-8").splitlines()
    refs = [json.loads(line) for line in args.refs.read_text(encoding="utf-8").splitlines()]
    ours = Translator.load(args.run)
    engines = {"ours (PyTorch fp32)": ours}
    for name, engine, compute_type in (("CTranslate2 float32", "ctranslate2", "float32"),
                                       ("CTranslate2 int8", "ctranslate2", "int8"),  # quantized as it loads
                                       ("transformers fp32", "transformers", "default")):
        try:
            engines[name] = Translator.load(args.run, engine=engine, compute_type=compute_type)
        except ValueError as error:  # its package is not installed
            print(f"{name}: left out ({error})")
    print(f"{machine_name()}, torch {torch.__version__}, {torch.get_num_threads()} threads, {date.today()}")
    print(f"{len(lines)} sentences, length-sorted batches of 64; identical = the same output ids as ours")
    print(f"{'engine':22} {'search':7} {'sentences/s':>12} {'vs ours':>8} {'BLEU':>6} {'identical':>10}")
    ours_ids, rates = {}, {}
    for beam_size in (1, 5):
        config = replace(ours.settings.search, beam_size=beam_size)
        reference = None
        for name, engine in engines.items():
            engine.translate(lines[:64], config)  # warm-up
            start = time.perf_counter()
            results = engine.translate(lines, config)
            rate = len(lines) / (time.perf_counter() - start)
            reference = reference or (results, rate)
            rates[name, beam_size] = rate
            ours_ids[str(beam_size)] = ours_ids.get(str(beam_size)) or [output_ids(t) for t in results]
            same = sum(output_ids(a) == output_ids(b) for a, b in zip(results, reference[0]))
            bleu = corpus_scores([t.text for t in results], refs).bleu
            search = "greedy" if beam_size == 1 else f"beam {beam_size}"
            print(f"{name:22} {search:7} {rate:12.1f} {rate / reference[1]:7.2f}x {bleu:6.2f} "
                  f"{same / len(lines):9.1%}")
    for other in ("CTranslate2 float32", "transformers fp32"):
        if (other, 5) in rates:
            print(f"ours / {other}, beam 5: {rates['ours (PyTorch fp32)', 5] / rates[other, 5]:.2f}x")
    if args.ids and args.ids.is_file():
        saved = json.loads(args.ids.read_text())
        for beam, ids in ours_ids.items():
            same = sum(a == b for a, b in zip(ids, saved[beam]))
            print(f"ours, beam {beam}: {same} of {len(ids)} outputs identical to {args.ids}")
    elif args.ids:
        args.ids.write_text(json.dumps(ours_ids))


if __name__ == "__main__":
    main()
