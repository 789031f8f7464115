"""A trained run's decoding speed, from ONE run: translate.py's pipeline with and without confidence scores and word
alignments, or (``--refs``) our search against CTranslate2 (float32, int8) and `transformers`' generate() on the
same weights (sentences/s, BLEU, identical outputs).

    python scripts/export_split.py --split test --out /tmp/test      # the lines and their references
    python scripts/benchmark_run.py --run outputs/my_run --lines /tmp/test.en
    python scripts/benchmark_run.py --run outputs/my_run --lines /tmp/test.en --refs /tmp/test.refs.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from benchmark import header, interleaved_times  # scripts/benchmark.py, beside this file


def lines_per_s(translate, lines: list[str]) -> tuple[float, list]:
    """Lines/s of ``translate(lines)`` after a warm-up on the first 64 of them, and what it returned."""
    translate(lines[:64])
    start = time.perf_counter()
    results = translate(lines)
    return len(lines) / (time.perf_counter() - start), results


def scores_section(run: Path, lines: list[str], lines_file: Path, repeats: int) -> None:
    """translate.py's pipeline on a trained run: lines/s with confidence scores (the search's own
    log-probabilities and the beam's other hypotheses, then each sentence's agreement, flags and mark) against
    without, and with each line's word alignment (``alignments=true``) against without, timed in turns."""
    from model.inference.translator import Translator

    translator = Translator.load(run, device="cpu")
    options = {"scores off": {"scores": False}, "scores on": {}, "alignments on": {"alignments": True}}
    runs = {name: (lambda kwargs=kwargs: translator.translate(lines, **kwargs)) for name, kwargs in options.items()}
    times = interleaved_times(runs, repeats, warmup=1)
    search = translator.settings.search
    print(f"\n{run}: {len(lines)} lines of {lines_file}, beam {search.beam_size}, translate.py's pipeline")
    print("   " + ", ".join(f"{name} {len(lines) / seconds:6.1f} lines/s" for name, seconds in times.items()))
    print(f"   time ratio scores on / off = {times['scores on'] / times['scores off']:.3f}x, "
          f"alignments on / off (scores on) = {times['alignments on'] / times['scores on']:.3f}x")



def output_ids(translation) -> list[list[int]]:
    """The ids the search produced for each sentence of a line."""
    return [sentence.output_ids for sentence in translation.sentences]


def engines_section(run: Path, lines: list[str], refs_file: Path, ids_file: Path | None) -> None:
    """Our search against CTranslate2 and `transformers`' generate() on the run's weights, greedy and beam 5 with the
    run's length limits and penalty (theirs is another formula, see translate.py --help); an engine whose package is
    missing is left out, with one line saying so."""
    from model.inference.translator import Translator
    from model.training.metrics import corpus_scores

    refs = [json.loads(line) for line in refs_file.read_text(encoding="utf-8").splitlines()]
    ours = Translator.load(run)
    engines = {"ours (PyTorch fp32)": ours}
    for name, engine, compute_type in (("CTranslate2 float32", "ctranslate2", "float32"),
                                       ("CTranslate2 int8", "ctranslate2", "int8"),  # quantized as it loads
                                       ("transformers fp32", "transformers", "default")):
        try:
            engines[name] = Translator.load(run, engine=engine, compute_type=compute_type)
        except ValueError as error:  # its package is not installed
            print(f"{name}: left out ({error})")
    print(f"\n{len(lines)} sentences, length-sorted batches of 64; identical = the same output ids as ours")
    print(f"{'engine':22} {'search':7} {'sentences/s':>12} {'vs ours':>8} {'BLEU':>6} {'identical':>10}")
    ours_ids, rates = {}, {}
    for beam_size in (1, 5):
        config = replace(ours.settings.search, beam_size=beam_size)
        reference = None
        for name, engine in engines.items():
            rate, results = lines_per_s(lambda chunk: engine.translate(chunk, config), lines)
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
    if ids_file and ids_file.is_file():
        saved = json.loads(ids_file.read_text())
        for beam, ids in ours_ids.items():
            same = sum(a == b for a, b in zip(ids, saved[beam]))
            print(f"ours, beam {beam}: {same} of {len(ids)} outputs identical to {ids_file}")
    elif ids_file:
        ids_file.write_text(json.dumps(ours_ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a trained run folder")
    parser.add_argument("--lines", type=Path, required=True, help="the lines to translate (scripts/export_split.py)")
    parser.add_argument("--refs", type=Path, help="their references, one JSON list a line: the engines compared")
    parser.add_argument("--ids", type=Path, help="with --refs: our output ids as JSON: compared with if the file "
                        "exists, else written (the same outputs before and after a change to the search)")
    args = parser.parse_args()
    if args.ids and not args.refs:
        parser.error("--ids needs --refs")
    print(header())
    lines = args.lines.read_text(encoding="utf-8").splitlines()
    if args.refs:
        return engines_section(args.run, lines, args.refs, args.ids)
    return scores_section(args.run, lines, args.lines, 3)


if __name__ == "__main__":
    main()
