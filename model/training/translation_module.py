"""The LightningModule: where the model meets training (it computes and logs; callbacks write and show). One
optimizer step, top to bottom: ``training_step`` (the loss) → Lightning's backward → ``configure_gradient_clipping``
(or the run's ``guard``: no update from a NaN) → the update → ``configure_optimizers``' schedule. A training step
never waits for the device: its metrics are summed there and read every ``log_every_n_steps``.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Protocol

import lightning as L
import torch
from torch import Tensor

from data.languages import LanguagePair
from model.search import Output, SearchConfig, search, sentence_attention
from model.training.aligned_head import aligned_index, alignment_loss
from model.training.metrics import Scores, corpus_scores, gathered
from model.training.schedule import Schedule, TimeBudget, training_progress
from model.training.trainer_state import fitting, is_logging_step
from model.transformer import Seq2SeqTransformer
from model.views import SentenceView, sentence_view


def label_smoothed_loss(logits: Tensor, target: Tensor, smoothing: float,
                        real: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Mean label-smoothed cross-entropy (as ``F.cross_entropy(label_smoothing=ε)``), plain NLL and accuracy of
    logits (N, V) against target (N,); ``real`` (N,) bool: average over those rows only (None: all)."""
    log_probs = logits.float().log_softmax(dim=-1)  # (N, V)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (N,)
    uniform = -log_probs.mean(dim=-1)  # cross-entropy with the uniform distribution
    loss = (1.0 - smoothing) * nll + smoothing * uniform  # (N,)
    correct = (logits.argmax(dim=-1) == target).float()  # (N,)
    if real is None:
        return loss.mean(), nll.mean(), correct.mean()
    weight = real.float() / real.sum().clamp(min=1)  # a mean over the real rows, without indexing them
    return (loss * weight).sum(), (nll * weight).sum(), (correct * weight).sum()


class Guard(Protocol):  # what the module asks of the run machinery's runtime/non_finite.NonFiniteGuard
    skipped: Tensor | None  # updates skipped so far, on the device

    def update(self, loss: Tensor, step: int) -> None: ...
    def check(self) -> None: ...
    def clip_and_skip(self, parameters, optimizer, clip_value: float | None, algorithm: str | None) -> None: ...


class TranslationModule(L.LightningModule):
    """Trains a ``Seq2SeqTransformer`` and scores it with sacreBLEU."""

    def __init__(self, model: Seq2SeqTransformer, optimizer: Callable[..., torch.optim.Optimizer], schedule: Schedule,
                 search: SearchConfig = SearchConfig(), label_smoothing: float = 0.1, val_bleu_samples: int = 500,
                 val_bleu_every: int = 1, model_config: dict | None = None, tokenizer_sha256: str | None = None,
                 guard: Guard | None = None, time_budget: TimeBudget | None = None, alignment_weight: float = 0.0,
                 aligned_layer: int | None = None, aligned_head: int = 1) -> None:
        super().__init__()
        # Plain values only (no modules, no callables): checkpoints stay loadable with weights_only=True.
        self.save_hyperparameters(ignore=["model", "optimizer", "schedule", "search", "guard", "time_budget"])
        if problems := module_problems(self.hparams):
            raise ValueError("; ".join(problems))
        self.model, self.optimizer_factory, self.schedule = model, optimizer, schedule
        # The aligned head as (layer, head) from 0, where a loss pulls one head toward word alignments; else None.
        self.aligned = None
        if alignment_weight > 0:  # a decoder without cross-attention (an ablation) has no head to align
            cross = model.decoder_layers[0].cross_attn if len(model.decoder_layers) else None
            heads = cross.num_heads if cross is not None else 0
            self.aligned = aligned_index(len(model.decoder_layers), heads, aligned_layer, aligned_head)
        self.guard = guard  # runtime/non_finite.NonFiniteGuard, or None: Lightning's own clipping
        self.time_budget = time_budget  # the run machinery's clock, or None: progress in steps
        self.search_config = search  # test: as configured; validation: greedy, same length limits
        self.tokenizer, self.pair = None, LanguagePair()  # the data's, in setup
        self.texts: dict[str, tuple[list[str], list[list[str]]]] = {}  # split -> (sources, references)
        self.evaluated: dict[str, list[str]] = {}  # stage -> its splits, one dataloader each (a fine-tune: two)
        self.readable_sources: list[tuple[str, list[int]]] = []  # (text, ids): validation sentences to draw
        self._sums, self._summed_steps, self._window_start = None, 0, None  # summed on the device between logging steps
        self.progress_metrics: dict[str, float] = {}  # what the progress bar shows, read at logging steps
        self._validations, self.bleu_scored = 0, True  # validations of this fit so far; whether this one scores BLEU
        self.validation_rows: list[tuple[str, list[str], str]] = []  # the last scored validation (callbacks show it)
        self.test_results: dict[str, tuple[list[tuple[str, list[str], str]], Scores]] = {}  # split -> rows, scores
        self._hypotheses: dict[str, dict[int, tuple[str, Output]]] = {}  # split -> sentence index -> translation

    def setup(self, stage: str) -> None:
        """Read what evaluation needs from the data module, once."""
        if self.tokenizer is not None:
            return
        datamodule = self.trainer.datamodule
        self.tokenizer, self.pair = datamodule.tokenizer, getattr(datamodule, "pair", LanguagePair())
        self.evaluated = {stage: datamodule.evaluation_splits(stage) for stage in ("validation", "test")}
        self.texts = {s: (datamodule.sources(s), datamodule.references(s)) for s in sum(self.evaluated.values(), [])}
        # Validation sentences of a readable length (5-12 source tokens), in a fixed order; any, if none is.
        pairs = list(zip(self.texts["validation"][0], datamodule.splits["validation"]["src_ids"]))
        self.readable_sources = [(text, ids) for text, ids in pairs if 5 <= len(ids) <= 12] or pairs

    # -- training: nothing here reads the device back, except at logging steps ------------
    def _losses(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The training loss (label-smoothed, plus the aligned head's loss where the batch has alignments), the plain
        NLL, the accuracy and the aligned head's loss (0 without one)."""
        real = batch["tgt_out"] != self.model.pad_id  # (B, T): where there is a target token
        # On a CPU the vocabulary projection only where there is a target: fewer FLOPs. On a GPU, indexing by a mask
        # waits for the device (the result's size is data): every position is projected, the padding weighted out.
        on_cpu = self.device.type == "cpu"
        guided = self.training and self.hparams.alignment_weight > 0 and "alignment" in batch
        arguments, output_mask = (batch["src"], batch["tgt_in"]), real if on_cpu else None
        if guided:
            logits, weights = self.model.forward_aligned(*arguments, *self.aligned, output_mask=output_mask)
        else:
            logits = self.model(*arguments, output_mask=output_mask)
        if on_cpu:  # logits (N, vocab)
            loss, nll, accuracy = label_smoothed_loss(logits, batch["tgt_out"][real], self.hparams.label_smoothing)
        else:
            loss, nll, accuracy = label_smoothed_loss(logits.flatten(0, 1), batch["tgt_out"].flatten(),
                                                      self.hparams.label_smoothing, real.flatten())
        aligning = alignment_loss(weights, batch["alignment"]) if guided else loss.new_zeros(())
        return loss + self.hparams.alignment_weight * aligning, nll, accuracy, aligning

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
        loss, nll, accuracy, aligning = self._losses(batch)
        if self.guard is not None:
            self.guard.update(loss, self.global_step)
        tokens = torch.stack([(batch[k] != self.model.pad_id).sum() for k in ("src", "tgt_out")])  # (source, target)
        # Summed on the device since the last logging step: (loss, nll, accuracy, tokens, the aligned head's loss).
        values = torch.stack([loss.detach(), nll.detach(), accuracy, tokens.sum().to(loss.dtype), aligning.detach()])
        self._sums = values if self._sums is None else self._sums + values
        self._summed_steps += 1
        if is_logging_step(self.trainer):
            self._log_training_metrics()
        return {"loss": loss, "tokens": tokens}  # the real tokens reach the callbacks (the time split counts them)

    def _log_training_metrics(self) -> None:
        """Means since the last logging step, read from the device in one transfer, to the loggers and the bar."""
        means = self._sums / self._summed_steps
        skipped = self.guard.skipped.view(1) if self.guard is not None else means.new_zeros(1)
        loss, nll, accuracy, tokens, aligning, skipped = torch.cat([means, skipped.to(means.dtype)]).tolist()
        now = time.perf_counter()
        metrics = {"train/loss": loss, "train/ppl": math.exp(min(nll, 50.0)), "train/accuracy": accuracy,
                   "train/lr": self.optimizers().param_groups[0]["lr"], "train/skipped_updates": skipped}
        if self.hparams.alignment_weight > 0:
            metrics["train/alignment_loss"] = aligning
        if self._window_start is not None:  # tokens over the time since the last logging step
            metrics["train/tokens_per_s"] = tokens * self._summed_steps / max(now - self._window_start, 1e-9)
        self.log_dict(metrics)  # in training_step: on this step alone, no batch size to infer
        self.progress_metrics = {"loss": round(loss, 3)}
        self._sums, self._summed_steps, self._window_start = None, 0, now

    def on_train_batch_start(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        if self._window_start is None:
            self._window_start = time.perf_counter()

    def on_train_end(self) -> None:
        if self.guard is not None:
            self.guard.check()  # the steps after the last logging step had finite losses (reads the device)

    def on_train_start(self) -> None:
        self._sums, self._summed_steps, self._window_start = None, 0, None

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        """Lightning's clipping; with the run machinery's guard, the guard clips and skips a non-finite update (under
        autocast Lightning refuses to clip for a fused optimizer). Under fp16 a fused optimizer's gradients are still
        scaled here (it unscales in its step): unscaled first; the scaler's step then skips a non-finite update."""
        scaler = getattr(self.trainer.precision_plugin, "scaler", None)
        if scaler is not None and getattr(optimizer, "_step_supports_amp_scaling", False):
            scaler.unscale_(optimizer)
        if self.guard is None:
            return self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)
        self.guard.clip_and_skip(self.parameters(), optimizer, gradient_clip_val, gradient_clip_algorithm)

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer, max_steps = self.optimizer_factory(self.model.parameters()), self.trainer.max_steps
        # Called after every update with the next step's number; the progress is read then.
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: self.schedule(step, training_progress(step, max_steps, self.time_budget)))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # -- validation: loss + greedy BLEU on a fixed subset + attention maps; test: beam ----
    def _translate(self, batch: dict[str, Tensor], rows: Tensor, split: str, config: SearchConfig) -> None:
        """Translate a batch's ``rows`` (copy slots filled from their sources) into the split's hypotheses."""
        indices, sources = batch["index"][rows].tolist(), self.texts[split][0]
        outputs = search(self.model, batch["src"][rows], self.tokenizer.bos_id, self.tokenizer.eos_id, config)
        texts = self.tokenizer.decode_tgt([output.ids for output in outputs], [sources[i] for i in indices])
        self._hypotheses.setdefault(split, {}).update(zip(indices, zip(texts, outputs)))

    def _log_evaluation(self, batch: dict[str, Tensor], split: str) -> None:
        loss, nll, accuracy, _ = self._losses(batch)
        stage = split.replace("validation", "val")  # val, test; a fine-tune's original corpus: val_original, ...
        self.log_dict({f"{stage}/loss": loss, f"{stage}/ppl": nll.exp(), f"{stage}/accuracy": accuracy},
                      batch_size=batch["src"].size(0), sync_dist=True, add_dataloader_idx=False)

    def on_validation_epoch_start(self) -> None:
        in_fit = fitting(self.trainer)
        # BLEU at every val_bleu_every-th validation of a fit (always outside one); the others are loss only.
        self.bleu_scored = not in_fit or self._validations % self.hparams.val_bleu_every == 0
        self._validations += in_fit
        self._window_start = None  # validation time is not training throughput: the window starts again
        if self._sums is not None:
            self._sums[3].zero_()  # ... and so do its tokens

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        split = self.evaluated["validation"][dataloader_idx]
        self._log_evaluation(batch, split)
        chosen = batch["index"] < self.hparams.val_bleu_samples  # a fixed subset, the same every epoch
        if self.bleu_scored and chosen.any():
            self._translate(batch, chosen, split, self.search_config.greedy)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        split = self.evaluated["test"][dataloader_idx]
        self._log_evaluation(batch, split)
        self._translate(batch, slice(None), split, self.search_config)

    def _score(self, split: str) -> tuple[list[tuple[str, list[str], str]], Scores]:
        """Log corpus BLEU/chrF of this epoch's hypotheses; return (source, references, hypothesis) rows."""
        hypotheses = gathered(self._hypotheses.pop(split, {}))  # taken: the next epoch starts empty
        sources, references = self.texts[split]
        rows = [(sources[i], references[i], hypotheses[i][0]) for i in sorted(hypotheses)]
        scores = corpus_scores([r[2] for r in rows], [r[1] for r in rows], self.pair.target)
        stage = split.replace("validation", "val")
        self.log_dict({f"{stage}/bleu": scores.bleu, f"{stage}/chrf": scores.chrf}, prog_bar=stage in ("val", "test"),
                      add_dataloader_idx=False)
        return rows, scores

    def on_validation_epoch_end(self) -> None:
        if self.bleu_scored:  # else nothing new to log: early stopping and the samples wait for the next
            scored = [self._score(split) for split in self.evaluated["validation"]]
            self.validation_rows = scored[0][0]  # time to quality, samples: callbacks

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self.guard is not None:
            self.guard.check()  # never save weights that a non-finite loss may have touched
        checkpoint["aligned_head"] = self.aligned  # what translate.py's alignments read (None: every head averaged)

    def on_test_epoch_end(self) -> None:  # written into the run folder by the TestReport callback
        self.test_results = {split: self._score(split) for split in self.evaluated["test"]}

    # -- what the attention views draw (model/views/callback.py) -------------------------
    @torch.no_grad()
    def sentence_views(self, count: int) -> list[SentenceView]:
        """The first ``count`` readable validation sentences, greedily translated now, with every attention weight."""
        tokenizer, views = self.tokenizer, []
        for text, src_ids in self.readable_sources[:count]:
            src = torch.tensor([src_ids], device=self.device)
            output = search(self.model, src, tokenizer.bos_id, tokenizer.eos_id, self.search_config.greedy)[0]
            translation = tokenizer.decode_tgt([output.ids], [text])[0]
            views.append(sentence_view(sentence_attention(self.model, src_ids, output.ids, tokenizer.bos_id),
                                       tokenizer.src_tokens, tokenizer.tgt_tokens, text, translation, self.pair.names,
                                       output.token_log_probs))
        return views


def module_problems(settings: dict, prefix: str = "") -> list[str]:
    """What ``TranslationModule`` refuses among its plain ``settings``, one phrase each (asked before any work)."""
    rules = {"val_bleu_every": (int, lambda v: v >= 1, "must be a whole number >= 1"),
             "label_smoothing": ((int, float), lambda v: 0.0 <= v < 1.0, "must be in [0, 1)"),
             "val_bleu_samples": (int, lambda v: v >= 0, "must be a whole number >= 0"),
             "alignment_weight": ((int, float), lambda v: v >= 0, "must be a number >= 0 (0: no aligned head)"),
             "aligned_layer": (int, lambda v: v != 0, "must be null or a whole number from 1 (negative: the last)"),
             "aligned_head": (int, lambda v: v >= 1, "must be a whole number >= 1")}
    return [f"{prefix}{name}={value!r} {message}" for name, (kinds, ok, message) in rules.items()
            if (value := settings.get(name)) is not None
            and (isinstance(value, bool) or not isinstance(value, kinds) or not ok(value))]
