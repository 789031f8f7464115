"""What the test split scored, written into the run folder: the module computes, this callback writes.

``test_metrics.json``: BLEU and chrF with their sacrebleu signatures, the search used, and when
validation BLEU first reached each quality mark; ``test_translations.tsv``: source, hypothesis and
references of every test sentence. Both are written whole or not at all, by the first process only.
"""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L

from data.atomic_file import atomic_file, write_text_atomically
from model.training.quality import QualityMarks


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
        write_text_atomically(run_dir / "test_metrics.json", json.dumps({
            "bleu": scores.bleu, "chrf": scores.chrf, "bleu_signature": scores.bleu_signature,
            "chrf_signature": scores.chrf_signature, "sentences": len(rows),
            "beam_size": search.beam_size, "length_penalty": search.length_penalty,
            "validation_bleu_reached": {mark: {"step": int(step), "minutes": round(minutes, 2)}
                                        for mark, (step, minutes) in marks.items()},
        }, indent=2))
        with atomic_file(run_dir / "test_translations.tsv") as out:
            for source, refs, hypothesis in rows:
                out.write(f"{source}\t{hypothesis}\t{' | '.join(refs)}\n")
