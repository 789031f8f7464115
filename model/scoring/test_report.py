"""What the test split scored, written into the run folder by the first process only, each file whole or not at all.

Beside the module's own test scores (its search on the split's token ids), everything here translates through a
``Translator`` made of the module's model (``module_translator``): the pipeline ``translate.py`` runs, so what is
scored is what users get.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import lightning as L

from data.atomic_file import atomic_file, write_text_atomically
from data.copy_cases import cases, copy_shares
from data.fragments import LONGEST, Fragment, fragments, is_word, labels, words
from data.splits import column
from model.inference.run_folder import RunSettings
from model.inference.search_backends import OurSearch
from model.inference.translator import Translation, Translator
from model.scoring.alignment_report import alignment_report
from model.scoring.confidence_report import (CALIBRATION_SENTENCES, calibration_from, save_calibration,
                                             translations_quality)
from model.scoring.pasted_text import pasted_scores
from model.scoring.short_text import fragment_scores
from model.scoring.time_to_quality import QualityMarks

log = logging.getLogger(__name__)
CONTEXT_PAIRS = 30_000  # training pairs the test pairs are word-aligned beside (AER 18 everyday with them, 17 with all)
READ_AT_MOST = 200_000  # training rows read to find them in (every row of a corpus below twice this: Tatoeba's)


def module_translator(pl_module: L.LightningModule, max_sentence_len: int) -> Translator:
    """The module's model, tokenizer, pair, test search and aligned head as a ``Translator``."""
    model, tokenizer = pl_module.model, pl_module.tokenizer
    settings = RunSettings(pl_module.search_config, max_sentence_len, pl_module.pair)
    return Translator(model, tokenizer, pl_module.device, OurSearch(model, tokenizer.bos_id, tokenizer.eos_id),
                      settings, aligned=pl_module.aligned)


def remembering(translator: Translator) -> tuple[Callable[[list[str]], list[str]], dict[str, Translation]]:
    """Lines in, lines out through ``translator``, each distinct line translated once; and what it translated."""
    remembered: dict[str, Translation] = {}

    def translate(lines: list[str]) -> list[str]:
        new = [line for line in dict.fromkeys(lines) if line not in remembered]
        remembered.update(zip(new, translator.translate(new)))
        return [remembered[line].text for line in lines]

    return translate, remembered


def test_fragments(datamodule: L.LightningDataModule, sources: list[str], references: list[list[str]]) -> list[Fragment]:
    """The test split's short text (``data/fragments.py``), its pairs word-aligned beside training sentences of more
    than ``LONGEST`` words (never the phrase pairs ``data.short_text`` adds: every run cuts the same fragments)."""
    train = datamodule.splits["train"]
    train = train.select(range(0, len(train), max(1, len(train) // READ_AT_MOST)))  # a large corpus: evenly spread
    sentences = [(source, target) for source, target in zip(column(train, "src"), column(train, "tgt"))
                 if sum(map(is_word, words(source))) > LONGEST]
    return fragments(sources, references, sentences[:: max(1, len(sentences) // CONTEXT_PAIRS)])


def scored_short_text(trainer: L.Trainer, pl_module: L.LightningModule, translate: Callable[[list[str]], list[str]],
                      translated: dict[str, Translation], sentence_chrf: float, calibrated: bool) -> dict | None:
    """The test split's short text scored (``short_text.py``; with the confidence marks, where they were set), and
    the pair's shipped labels (``data/labels/``), said in one line each and logged (``test/fragments_bleu``,
    ``_chrf``, ``_exact_match``; ``test/labels_chrf``, ``_exact_match``)."""
    sources, references = pl_module.texts["test"]
    short_texts = test_fragments(trainer.datamodule, sources, references)
    short = fragment_scores(translate, short_texts, pl_module.pair.target, sentence_chrf)
    if short is None:
        return None
    if calibrated:  # do the marks hold on short text?
        short["confidence"] = translations_quality([translated[f.source] for f in short_texts],
                                                   [f.references for f in short_texts], pl_module.pair.target)
    log.info("short text: %d fragments, chrF %.1f (%.2f of the sentences'), BLEU %.1f, exact %.0f%%",
             short["fragments"], short["chrf"], short["chrf_ratio"] or 0, short["bleu"], 100 * short["exact_match"])
    typed = labels(pl_module.pair.source, pl_module.pair.target)  # a list of our own: labels, signs, form fields
    short["labels"] = fragment_scores(translate, typed, pl_module.pair.target, sentence_chrf)
    metrics = {f"test/fragments_{k}": short[k] for k in ("bleu", "chrf", "exact_match")}
    if short["labels"]:
        log.info("labels: %d, exact %.0f%%, chrF %.1f", short["labels"]["fragments"],
                 100 * short["labels"]["exact_match"], short["labels"]["chrf"])
        metrics |= {f"test/labels_{k}": short["labels"][k] for k in ("chrf", "exact_match")}
    for logger in trainer.loggers:
        logger.log_metrics(metrics, step=trainer.global_step)
    return short


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


class TestReport(L.Callback):
    """Writes ``test_metrics.json`` and ``test_translations.tsv`` once ``trainer.test`` has scored the split, and
    the run's confidence marks (``confidence.json``, set by the validation split)."""

    __test__ = False  # not a pytest test class, whatever its name

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        results = getattr(pl_module, "test_results", {})
        if "test" not in results or not trainer.is_global_zero:
            return
        (rows, scores), search, run_dir = results["test"], pl_module.search_config, Path(trainer.default_root_dir)
        marks = next((c.reached for c in trainer.callbacks if isinstance(c, QualityMarks)), {})
        translator = module_translator(pl_module, trainer.datamodule.hparams.max_sentence_len)
        translator.calibration = calibration_from(translator, pl_module.texts["validation"][0][:CALIBRATION_SENTENCES])
        if translator.calibration is not None:  # the marks of everything translated below, and translate.py's
            save_calibration(run_dir, translator.calibration)
        translate, translated = remembering(translator)
        sources, references = pl_module.texts["test"]
        pasted = pasted_scores(translate, sources, references, pl_module.pair.target)  # the sentences among them
        for logger in trainer.loggers:  # wandb's summary among them
            logger.log_metrics({"test/paragraph_bleu": pasted["paragraph"]["bleu"],
                                **{f"test/{kind}_bleu": bleu for kind, bleu in pasted["case_insensitive_bleu"].items()
                                   if kind != "as_written"}}, step=trainer.global_step)
        short = scored_short_text(trainer, pl_module, translate, translated, scores.chrf,
                                  translator.calibration is not None)
        confidence = translations_quality([translated[source] for source in sources], references,
                                          pl_module.pair.target) if translator.calibration is not None else None
        write_text_atomically(run_dir / "test_metrics.json", json.dumps({
            "pair": pl_module.pair.codes, "bleu": scores.bleu, "chrf": scores.chrf, "sentences": len(rows),
            "bleu_signature": scores.bleu_signature, "chrf_signature": scores.chrf_signature,
            "beam_size": search.beam_size, "length_penalty": search.length_penalty,
            "validation_bleu_reached": {mark: {"step": int(step), "minutes": round(minutes, 2)}
                                        for mark, (step, minutes) in marks.items()},
            "copied": copied(translate, pl_module.pair.source), "pasted": pasted, "fragments": short,
            "confidence": confidence,
            "alignment": scored_alignment(trainer, pl_module),
            **({"original": {"bleu": results["test_original"][1].bleu, "chrf": results["test_original"][1].chrf,
                             "sentences": len(results["test_original"][0])}} if "test_original" in results else {}),
        }, indent=2))
        with atomic_file(run_dir / "test_translations.tsv") as out:
            for source, refs, hypothesis in rows:
                out.write(f"{source}\t{hypothesis}\t{' | '.join(refs)}\n")
