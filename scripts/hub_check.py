"""What someone who downloads the ``transformers`` export gets: ``generate()`` on raw text, no copy slots.

    python scripts/export.py outputs/my_run --to transformers     # first: outputs/my_run/transformers
    python scripts/hub_check.py outputs/my_run                     # the run's test sentences: minutes
    python scripts/hub_check.py outputs/slots_off --names-from outputs/my_run

Translates the run's test sources (``test_translations.tsv``) as the model card shows and prints, beside
translate.py's: BLEU / chrF, how many differ, and how many keep a name the training pairs copy (``copy_slots.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from data.copy_slots import CopySlots
from data.entities import contains, tokens
from data.truecase import Truecaser


def read_rows(run: Path) -> list[tuple[str, str, list[str]]]:
    """(source, translate.py's translation, references) of each test sentence."""
    rows = []
    for line in (run / "test_translations.tsv").read_text(encoding="utf-8").splitlines():
        source, translation, references = line.split("\t")
        rows.append((source, translation, references.split(" | ")))
    return rows


def generated(folder: Path, sources: list[str], batch_size: int = 32) -> list[str]:
    """``generate()`` on raw ``sources`` (with the card's two steps around it), batched by length, in input order."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    truecaser = Truecaser.load(folder)  # the card's steps: the first word as sentences write it inside, then its capital
    read = [truecaser.truecased(source) for source in sources] if truecaser else sources
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    outputs = [""] * len(sources)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            encoded = tokenizer([read[i] for i in batch], return_tensors="pt", padding=True, truncation=True)
            texts = tokenizer.batch_decode(model.generate(**encoded), skip_special_tokens=True)
            for i, text in zip(batch, texts):
                outputs[i] = " ".join(text.split())
                outputs[i] = Truecaser.recapitalized(outputs[i], sources[i]) if truecaser else outputs[i]
    return outputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a finished run folder (with test_translations.tsv)")
    parser.add_argument("--folder", type=Path, help="the transformers folder (default: RUN/transformers)")
    parser.add_argument("--names-from", type=Path, help="the run whose copy_slots.json names the corpus' names "
                        "(default: RUN; for a run trained with data.copy_slots=false, another run on its corpus)")
    args = parser.parse_args()
    folder = args.folder or args.run / "transformers"
    slots = CopySlots.load(args.names_from or args.run)
    if not (args.run / "test_translations.tsv").is_file() or not (folder / "config.json").is_file() or slots is None:
        print(f"hub_check.py: needs {args.run}/test_translations.tsv, {folder} (python scripts/export.py "
              f"{args.run} --to transformers) and {args.names_from or args.run}/copy_slots.json", file=sys.stderr)
        return 2
    from model.training.metrics import corpus_scores

    rows = read_rows(args.run)
    sources, ours, references = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
    hub = generated(folder, sources)
    target = json.loads((args.run / "test_metrics.json").read_text())["pair"].split("-")[1]
    named = [(i, names) for i, source in enumerate(sources)
             if (names := {t.text for t in tokens(source) if t.kind == "word" and t.text in slots.copied})]
    print(f"{args.run}: {len(rows)} test sentences, {sum(a != b for a, b in zip(ours, hub))} translated otherwise "
          f"by generate(); {len(named)} hold a name the training pairs copy")
    for label, texts in (("translate.py", ours), ("generate() on raw text", hub)):
        scores = corpus_scores(texts, references, target)
        kept = sum(all(contains(texts[i], name) for name in names) for i, names in named)
        print(f"   {label:26s} BLEU {scores.bleu:5.2f}  chrF {scores.chrf:5.2f}  names kept {kept} / {len(named)} "
              f"({kept / max(len(named), 1):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
