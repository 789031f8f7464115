"""What the test split scored, written into the run folder: the module computes, this callback writes.

``test_metrics.json``: BLEU and chrF with their sacrebleu signatures, the search used, when
validation BLEU first reached each quality mark, and the share of names and numbers the search copies
(``copied``, per kind, on ``data/copy_cases.py``'s sentences: seconds of work);
``test_translations.tsv``: source, hypothesis and references of every test sentence. Both are written
whole or not at all, by the first process only.
"""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L

from data.atomic_file import atomic_file, write_text_atomically
from data.copy_cases import cases, copy_shares
from data.sampler import pad_batch
from model.search import search
from model.training.quality import QualityMarks


def copied(module: L.LightningModule, batch_size: int = 64) -> dict[str, float] | None:
    """The share of the copy check's names and numbers that ``module``'s test search copies, per kind (None
    where the source is not English: the check's sentences are)."""
    if module.pair.source != "en":
        return None
    checked, tokenizer, model = cases(), module.tokenizer, module.model
    sentences, outputs, training = [case.sentence for case in checked], [], model.training
    model.eval()
    for start in range(0, len(sentences), batch_size):
        src = pad_batch(tokenizer.encode_src(sentences[start : start + batch_size]), model.pad_id)  # (B, S)
        outputs += search(model, src.to(module.device), tokenizer.bos_id, tokenizer.eos_id, module.search_config)
    model.train(training)
    shares = copy_shares(checked, tokenizer.decode_tgt(outputs, sentences))
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
        write_text_atomically(run_dir / "test_metrics.json", json.dumps({
            "pair": pl_module.pair.codes, "bleu": scores.bleu, "chrf": scores.chrf, "sentences": len(rows),
            "bleu_signature": scores.bleu_signature, "chrf_signature": scores.chrf_signature,
            "beam_size": search.beam_size, "length_penalty": search.length_penalty,
            "validation_bleu_reached": {mark: {"step": int(step), "minutes": round(minutes, 2)}
                                        for mark, (step, minutes) in marks.items()},
            "copied": copied(pl_module),
        }, indent=2))
        with atomic_file(run_dir / "test_translations.tsv") as out:
            for source, refs, hypothesis in rows:
                out.write(f"{source}\t{hypothesis}\t{' | '.join(refs)}\n")
