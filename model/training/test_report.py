"""What the test split scored, written into the run folder by the first process only, each file whole or not at all."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from pathlib import Path

import lightning as L

from data.atomic_file import atomic_file, write_text_atomically
from data.copy_cases import cases, copy_shares
from data.splits import column
from data.tokenizer import truncate_source
from model.training.alignment_report import alignment_report
from model.training.confidence_report import (CALIBRATION_SENTENCES, calibration_of, confidence_quality, confidences,
                                              save_calibration, searched)
from model.training.pasted_text import pasted_scores, translated_lines
from model.training.quality import QualityMarks

log = logging.getLogger(__name__)


def copied(translate: Callable[[list[str]], list[str]], source_lang: str) -> dict[str, float] | None:
    """Share of ``data/copy_cases.py``'s names and numbers ``translate`` copies, per kind (None unless from English)."""
    if source_lang != "en":
        return None
    checked = cases()
    shares = copy_shares(checked, translate([case.sentence for case in checked]))
    return {kind: round(hits / total, 4) for kind, (hits, total) in shares.items()}


def scored_alignment(trainer: L.Trainer, pl_module: L.LightningModule) -> dict:
    """The cross-attention's AER against the pair's gold alignments (``alignment_report``), said in one line and
    logged (``test/aer_<set>``: all heads averaged; ``_aligned_head``, ``_best_head``, ``_diagonal``)."""
    report = alignment_report(pl_module.model, pl_module.tokenizer, pl_module.pair, aligned=pl_module.aligned)
    scored = {name: found for name, found in report.items() if isinstance(found, dict) and found.get("pairs")}
    log.info("attention as word alignment: " + ("; ".join(
        f"{name} AER " + (f"{found['aligned_head']['aer']} the aligned head, " if "aligned_head" in found else "")
        + f"{found['averaged']} all heads averaged, {found['best_head']['aer']} the best head "
        f"(L{found['best_head']['layer']} H{found['best_head']['head']}), {found['diagonal']} a diagonal line"
        for name, found in scored.items()) or report.get("note", "no gold pair fits the model")))
    metrics = {f"test/aer_{name}{suffix}": value for name, found in scored.items() for suffix, value in
               (("", found["averaged"]), ("_best_head", found["best_head"]["aer"]), ("_diagonal", found["diagonal"]),
                ("_aligned_head", found.get("aligned_head", {}).get("aer"))) if value is not None}
    for logger in trainer.loggers:
        logger.log_metrics(metrics, step=trainer.global_step)
    return report


def calibrated_quality(trainer: L.Trainer, pl_module: L.LightningModule, rows: list, run_dir: Path) -> dict | None:
    """Sets the run's confidence marks from its validation split (``confidence.json``), then scores them on
    the test split's outputs (``model/training/confidence_report.py``); None without a validation split."""
    datamodule, tokenizer, config = trainer.datamodule, pl_module.tokenizer, pl_module.search_config
    limit = datamodule.hparams.max_sentence_len

    def read(split: str, count: int) -> tuple[list[list[int]], list[bool]]:  # as evaluation reads them: truncated
        whole = column(datamodule.splits[split], "src_ids")[:count]
        return [truncate_source(ids, limit) for ids in whole], [len(ids) > limit for ids in whole]

    validation, _ = read("validation", CALIBRATION_SENTENCES)
    if not validation:  # nothing to set the marks by
        return None
    with trainer.precision_plugin.forward_context():  # the precision the test split was searched in (bf16 or not)
        outputs = searched(pl_module.model, validation, tokenizer.bos_id, tokenizer.eos_id, config)
    calibration = calibration_of(validation, outputs, tokenizer.eos_id, config.beam_size, tokenizer.decode_tgt)
    save_calibration(run_dir, calibration)
    test_sources, cut = read("test", len(rows))  # rows: every test sentence, in sentence order
    found = confidences(test_sources, pl_module.test_outputs["test"], tokenizer.eos_id, calibration,
                        tokenizer.decode_tgt, cut)
    return confidence_quality(found, [row[2] for row in rows], [row[1] for row in rows], pl_module.pair.target)


class TestReport(L.Callback):
    """Writes ``test_metrics.json`` and ``test_translations.tsv`` once ``trainer.test`` has scored the split, and
    the run's confidence marks (``confidence.json``)."""

    __test__ = False  # not a pytest test class, whatever its name

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        results = getattr(pl_module, "test_results", {})
        if "test" not in results or not trainer.is_global_zero:
            return
        (rows, scores), search, run_dir = results["test"], pl_module.search_config, Path(trainer.default_root_dir)
        marks = next((c.reached for c in trainer.callbacks if isinstance(c, QualityMarks)), {})
        limit = trainer.datamodule.hparams.max_sentence_len
        translate = functools.partial(translated_lines, pl_module, max_source_tokens=limit)  # translate.py's way
        pasted = pasted_scores(translate, *pl_module.texts["test"], pl_module.pair.target)  # sources, references
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
            "confidence": calibrated_quality(trainer, pl_module, rows, run_dir),
            "alignment": scored_alignment(trainer, pl_module),
            **({"original": {"bleu": results["test_original"][1].bleu, "chrf": results["test_original"][1].chrf,
                             "sentences": len(results["test_original"][0])}} if "test_original" in results else {}),
        }, indent=2))
        with atomic_file(run_dir / "test_translations.tsv") as out:
            for source, refs, hypothesis in rows:
                out.write(f"{source}\t{hypothesis}\t{' | '.join(refs)}\n")
