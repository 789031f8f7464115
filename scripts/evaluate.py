"""Score translations with sacreBLEU (BLEU and chrF), one or several references per sentence.

    python scripts/evaluate.py hypotheses.txt references.tsv        # source<TAB>reference lines
    python scripts/evaluate.py hypotheses.txt references.jsonl      # one JSON list of references a line
    python scripts/evaluate.py hypotheses.txt refs.txt              # plain text: one reference a line
    python scripts/evaluate.py hypotheses.txt refs.txt --target-lang zh   # BLEU tokenized for Chinese
    python scripts/evaluate.py caps.hyp caps.refs.jsonl --lowercase       # ignoring case (text in capitals)

TSV references are grouped by source, in order of first appearance (one hypothesis a distinct source).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from model.training.metrics import Scores, corpus_scores


def read_references(path: str | Path) -> list[list[str]]:
    """Per-sentence reference lists from a .tsv (grouped by source), .jsonl/.json (lists) or plain file."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix in (".jsonl", ".json"):
        references = []
        for n, line in enumerate(lines, 1):
            refs = json.loads(line)
            if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
                raise ValueError(f"{path}:{n}: expected a JSON list of strings")
            references.append(refs)
        return references
    if path.suffix == ".tsv":
        grouped: dict[str, list[str]] = {}
        for n, line in enumerate(lines, 1):
            columns = line.split("\t")
            if len(columns) < 2:
                raise ValueError(f"{path}:{n}: expected source<TAB>reference")
            grouped.setdefault(columns[0], []).append(columns[1])
        return list(grouped.values())
    return [[line] for line in lines]


def evaluate(hypotheses_path: str | Path, references_path: str | Path, target_lang: str = "es",
             lowercase: bool = False) -> Scores:
    hypotheses = Path(hypotheses_path).read_text(encoding="utf-8").splitlines()
    references = read_references(references_path)
    if len(hypotheses) != len(references):
        raise ValueError(f"{hypotheses_path} has {len(hypotheses)} lines but {references_path} "
                         f"has {len(references)} sentences")
    return corpus_scores(hypotheses, references, target_lang, lowercase)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("hypotheses", help="translations, one a line")
    parser.add_argument("references", help=".tsv (source<TAB>reference), .jsonl (JSON lists) or plain text")
    parser.add_argument("--target-lang", default="es", help="the translations' language (ISO 639-1): BLEU's "
                        "tokenizer follows it (zh, ja, ...: the signature says which)")
    parser.add_argument("--lowercase", action="store_true", help="BLEU and chrF ignoring case (how the test report "
                        "scores the split in Title Case and ALL CAPS: scripts/export_split.py --as)")
    args = parser.parse_args(argv)
    try:
        scores = evaluate(args.hypotheses, args.references, args.target_lang, args.lowercase)
    except (OSError, ValueError) as error:
        parser.exit(2, f"evaluate.py: {error}\n")
    print(f"BLEU = {scores.bleu:.2f}   {scores.bleu_signature}")
    print(f"chrF = {scores.chrf:.2f}   {scores.chrf_signature}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
