"""What the test split scored, written into the run folder: the module computes, this callback writes.

``test_metrics.json``: BLEU and chrF with their sacrebleu signatures, the search used, when
validation BLEU first reached each quality mark, the share of names and numbers the search copies
(``copied``, per kind, on ``data/copy_cases.py``'s sentences: seconds of work), and the split as people paste
it (``pasted``: paragraphs, Title Case, ALL CAPS; ``pasted_text.py``), also logged to the loggers;
``test_translations.tsv``: source, hypothesis and references of every test sentence. Both are written
whole or not at all, by the first process only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import lightning as L

from data.atomic_file import atomic_file, write_text_atomically
from data.copy_cases import cases, copy_shares
from model.training.pasted_text import pasted_scores, translated_lines
from model.training.quality import QualityMarks


def copied(translate: Callable[[list[str]], list[str]], source_lang: str) -> dict[str, float] | None:
    """The share of the copy check's names and numbers that ``translate`` copies, per kind (None where the
    source is not English: the check's sentences are)."""
    if source_lang != "en":
        return None
    checked = cases()
    shares = copy_shares(checked, translate([case.sentence for case in checked]))
    return {kind: round(hits / total, 4) for kind, (hits, total) in shares.items()}


class TestReport(L.Callback):
    """Writes ``test_metrics.json`` and ``test_translations.tsv`` once ``trainer.test`` has scored the split."""

    __test__ = False  # not a pytest test class, whatever its name

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        result = getattr(pl_module, "test_result", None)
        if result is None or not trainer.is_global_zero:
            return
        rows, scores = result
        search = pl_module.search_config
        run_dir = Path(trainer.default_root_dir)
        marks = next((c.reached for c in trainer.callbacks if isinstance(c, QualityMarks)), {})
        limit = trainer.datamodule.hparams.max_sentence_len
        translate = functools.partial(translated_lines, pl_module, max_source_tokens=limit)  # translate.py's way
        sources, references = pl_module.texts["test"]
        pasted = pasted_scores(translate, sources, references, pl_module.pair.target)
        for logger in trainer.loggers:  # wandb's summary among them
            logger.log_metrics({"test/paragraph_bleu": pasted["paragraph"]["bleu"],
                                **{f"test/{kind}_bleu": bleu for kind, bleu in pasted["case_insensitive_bleu"].items()
                                   if kind != "as_written"}}, step=trainer.global_step)
        write_text_atomically(run_dir / "test_metrics.json", json.dumps({
            "pair": pl_module.pair.codes, "bleu": scores.bleu, "chrf": scores.chrf, "sentences": len(rows),
            "bleu_signature": scores.bleu_signature, "chrf_signature": scores.chrf_signature,
            "beam_size": search.beam_size, "length_penalty": search.length_penalty,
            "validation_bleu_reached": {mark: {"step": int(step), "minutes": round(minutes, 2)}
                                        for mark, (step, minutes) in marks.items()},
            "copied": copied(translate, pl_module.pair.source), "pasted": pasted,
        }, indent=2))
        with atomic_file(run_dir / "test_translations.tsv") as out:
            for source, refs, hypothesis in rows:
                out.write(f"{source}\t{hypothesis}\t{' | '.join(refs)}\n")
