"""The LightningModule: where the model meets training — loss, learning-rate schedule, BLEU.

It wraps a plain ``Seq2SeqTransformer`` and gets everything else explicitly: the optimizer
and the learning-rate schedule as factories, the search settings as a ``SearchConfig``
(all built by Hydra from ``configs/module``), and in ``setup`` the tokenizer, sources and
references of the data module, read once. It computes and logs; callbacks write and show:
the attention views (``model/views/callback.py``, from ``sentence_views``), time to quality and
sample translations (``quality.py``), the test report (``test_report.py``).

One optimizer step, read top to bottom: ``training_step`` (the loss) → Lightning's backward →
``configure_gradient_clipping`` → the update → ``configure_optimizers``' schedule (``schedule.py``).
On its own the module clips as Lightning does and its schedule's progress is steps over
``trainer.max_steps``. The run machinery (``runtime/``) hands it two collaborators: a ``guard``
(``runtime/non_finite.py``: the clipping, and no update from a NaN, decided on the device) and a
``time_budget`` (``schedule.TimeBudget``: progress in time over ``runtime.max_time``).

A training step never waits for the device: its metrics are summed there and read every
``log_every_n_steps``. Validation is teacher-forced loss and accuracy every time, greedy BLEU on
a fixed subset every ``val_bleu_every``-th time.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Protocol

import lightning as L
import torch
from torch import Tensor

from data.languages import LanguagePair
from model.search import SearchConfig, search, sentence_attention
from model.training.metrics import Scores, corpus_scores, gathered
from model.training.schedule import Schedule, TimeBudget, training_progress
from model.training.trainer_state import fitting, is_logging_step
from model.transformer import Seq2SeqTransformer
from model.views import SentenceView, sentence_view


def label_smoothed_loss(logits: Tensor, target: Tensor, smoothing: float,
                        real: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Mean label-smoothed cross-entropy; also the plain NLL (for perplexity) and accuracy.

    logits (N, V) and target (N,); ``real`` (N,) bool: average over those rows only (None: all).
    Same value as ``F.cross_entropy(label_smoothing=ε)``, from one log-softmax so the NLL comes free.
    """
    log_probs = logits.float().log_softmax(dim=-1)  # (N, V)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (N,)
    uniform = -log_probs.mean(dim=-1)  # cross-entropy with the uniform distribution
    loss = (1.0 - smoothing) * nll + smoothing * uniform  # (N,)
    correct = (logits.argmax(dim=-1) == target).float()  # (N,)
    if real is None:
        return loss.mean(), nll.mean(), correct.mean()
    weight = real.float() / real.sum().clamp(min=1)  # a mean over the real rows, without indexing them
    return (loss * weight).sum(), (nll * weight).sum(), (correct * weight).sum()


class Guard(Protocol):
    """What the module asks of the run machinery's non-finite guard (``runtime/non_finite.NonFiniteGuard``)."""

    skipped: Tensor | None  # updates skipped so far, on the device

    def update(self, loss: Tensor, step: int) -> None: ...
    def check(self) -> None: ...
    def clip_and_skip(self, parameters, optimizer, clip_value: float | None, algorithm: str | None) -> None: ...


class TranslationModule(L.LightningModule):
    """Trains a ``Seq2SeqTransformer`` and scores it with sacreBLEU."""

    def __init__(
        self,
        model: Seq2SeqTransformer,
        optimizer: Callable[..., torch.optim.Optimizer],
        schedule: Schedule,
        search: SearchConfig = SearchConfig(),
        label_smoothing: float = 0.1,
        val_bleu_samples: int = 500,
        val_bleu_every: int = 1,
        model_config: dict | None = None,
        tokenizer_sha256: str | None = None,
        guard: Guard | None = None,
        time_budget: TimeBudget | None = None,
    ) -> None:
        super().__init__()
        if problems := module_problems({"val_bleu_every": val_bleu_every, "label_smoothing": label_smoothing,
                                        "val_bleu_samples": val_bleu_samples}):
            raise ValueError("; ".join(problems))
        # Plain values only (no modules, no callables): checkpoints stay loadable with weights_only=True.
        self.save_hyperparameters(ignore=["model", "optimizer", "schedule", "search", "guard", "time_budget"])
        self.model, self.optimizer_factory, self.schedule = model, optimizer, schedule
        self.guard = guard  # runtime/non_finite.NonFiniteGuard, or None: Lightning's own clipping
        self.time_budget = time_budget  # the run machinery's clock, or None: progress in steps
        self.search_config = search  # test: as configured; validation: greedy, same length limits
        self.tokenizer = None
        self.pair = LanguagePair()  # the data's, in setup
        self.texts: dict[str, tuple[list[str], list[list[str]]]] = {}  # split -> (sources, references)
        self.readable_sources: list[tuple[str, list[int]]] = []  # (text, ids): validation sentences to draw
        # Training metrics, summed on the device between logging steps (see training_step).
        self._sums: Tensor | None = None
        self._summed_steps = 0
        self._window_start: float | None = None  # when the current logging window's steps began
        self.progress_metrics: dict[str, float] = {}  # what the progress bar shows, read at logging steps
        self._validations = 0  # validations of this fit so far (val_bleu_every counts them)
        self.bleu_scored = True  # this validation scores BLEU (early stopping and the samples ask)
        self.validation_rows: list[tuple[str, list[str], str]] = []  # the last scored validation (callbacks show it)
        self.test_result: tuple[list[tuple[str, list[str], str]], Scores] | None = None  # rows, scores
        self._hypotheses: dict[int, str] = {}

    def setup(self, stage: str) -> None:
        """Read what evaluation needs from the data module, once."""
        if self.tokenizer is not None:
            return
        datamodule = self.trainer.datamodule
        self.tokenizer, self.pair = datamodule.tokenizer, getattr(datamodule, "pair", LanguagePair())
        self.texts = {split: (datamodule.sources(split), datamodule.references(split))
                      for split in ("validation", "test")}
        # Validation sentences of a readable length (5-12 source tokens), in a fixed order; any, if none is.
        pairs = list(zip(self.texts["validation"][0], datamodule.splits["validation"]["src_ids"]))
        self.readable_sources = [(text, ids) for text, ids in pairs if 5 <= len(ids) <= 12] or pairs

    # -- training: nothing here reads the device back, except at logging steps ------------
    def _losses(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """Label-smoothed loss, NLL and accuracy of a teacher-forced batch."""
        real = batch["tgt_out"] != self.model.pad_id  # (B, T): where there is a target token
        smoothing = self.hparams.label_smoothing
        if self.device.type == "cpu":  # the vocabulary projection only where there is a target: fewer FLOPs
            logits = self.model(batch["src"], batch["tgt_in"], output_mask=real)  # (N, vocab)
            return label_smoothed_loss(logits, batch["tgt_out"][real], smoothing)
        # On a GPU, indexing by a mask waits for the device (the result's size is data): every position
        # is projected and the padding is weighted out of the loss instead.
        logits = self.model(batch["src"], batch["tgt_in"])  # (B, T, vocab)
        return label_smoothed_loss(logits.flatten(0, 1), batch["tgt_out"].flatten(), smoothing, real.flatten())

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
        loss, nll, accuracy = self._losses(batch)
        if self.guard is not None:
            self.guard.update(loss, self.global_step)
        pad = self.model.pad_id
        tokens = torch.stack([(batch["src"] != pad).sum(), (batch["tgt_out"] != pad).sum()])  # (source, target)
        # Summed on the device since the last logging step: (loss, nll, accuracy, tokens).
        values = torch.stack([loss.detach(), nll.detach(), accuracy, tokens.sum().to(loss.dtype)])
        self._sums = values if self._sums is None else self._sums + values
        self._summed_steps += 1
        if is_logging_step(self.trainer):
            self._log_training_metrics()
        return {"loss": loss, "tokens": tokens}  # the real tokens reach the callbacks (the time split counts them)

    def check_finite(self) -> None:
        """Raise ``NonFiniteLossError`` if a training step so far had a non-finite loss (reads the device)."""
        if self.guard is not None:
            self.guard.check()

    def _log_training_metrics(self) -> None:
        """Means since the last logging step, read from the device in one transfer, to the loggers and the bar."""
        self.check_finite()
        means = self._sums / self._summed_steps
        skipped = self.guard.skipped.view(1) if self.guard is not None else means.new_zeros(1)
        loss, nll, accuracy, tokens, skipped = torch.cat([means, skipped.to(means.dtype)]).tolist()
        now = time.perf_counter()
        metrics = {"train/loss": loss, "train/ppl": math.exp(min(nll, 50.0)), "train/accuracy": accuracy,
                   "train/lr": self.optimizers().param_groups[0]["lr"], "train/skipped_updates": skipped}
        if self._window_start is not None:  # tokens over the time since the last logging step
            metrics["train/tokens_per_s"] = tokens * self._summed_steps / max(now - self._window_start, 1e-9)
        self.log_dict(metrics, on_step=True, on_epoch=False, batch_size=1)
        self.progress_metrics = {"loss": round(loss, 3)}
        self._sums, self._summed_steps, self._window_start = None, 0, now

    def on_train_batch_start(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        if self._window_start is None:
            self._window_start = time.perf_counter()

    def on_train_end(self) -> None:
        self.check_finite()  # the steps after the last logging step

    def on_train_start(self) -> None:
        self._sums, self._summed_steps, self._window_start = None, 0, None

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        """Clip as configured (Lightning's clipping); with a guard, the guard clips and skips the update when the
        gradient norm is not finite (under fp16 the scaler skips them: Lightning's clipping)."""
        if self.guard is None or getattr(self.trainer.precision_plugin, "scaler", None) is not None:
            self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)
        else:
            self.guard.clip_and_skip(self.parameters(), optimizer, gradient_clip_val, gradient_clip_algorithm)

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = self.optimizer_factory(self.model.parameters())
        max_steps = self.trainer.max_steps
        # Called after every update with the next step's number; the progress is read then.
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: self.schedule(step, training_progress(step, max_steps, self.time_budget)))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # -- validation: loss + greedy BLEU on a fixed subset + attention maps; test: beam ----
    def _translate(self, batch: dict[str, Tensor], rows: Tensor, split: str, config: SearchConfig) -> dict[int, str]:
        """The translations of a batch's ``rows``, by sentence index (copy slots filled from their sources)."""
        indices, sources = batch["index"][rows].tolist(), self.texts[split][0]
        output_ids = search(self.model, batch["src"][rows], self.tokenizer.bos_id, self.tokenizer.eos_id, config)
        return dict(zip(indices, self.tokenizer.decode_tgt(output_ids, [sources[i] for i in indices])))

    def _log_evaluation(self, batch: dict[str, Tensor], stage: str) -> None:
        loss, nll, accuracy = self._losses(batch)
        self.log_dict({f"{stage}/loss": loss, f"{stage}/ppl": nll.exp(), f"{stage}/accuracy": accuracy},
                      on_step=False, on_epoch=True, batch_size=batch["src"].size(0), sync_dist=True)

    def on_validation_epoch_start(self) -> None:
        self._hypotheses = {}
        in_fit = fitting(self.trainer)
        # BLEU at every val_bleu_every-th validation of a fit (always outside one); the others are loss only.
        self.bleu_scored = not in_fit or self._validations % self.hparams.val_bleu_every == 0
        self._validations += in_fit
        self._window_start = None  # validation time is not training throughput: the window starts again
        if self._sums is not None:
            self._sums[3].zero_()  # ... and so do its tokens

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._log_evaluation(batch, "val")
        chosen = batch["index"] < self.hparams.val_bleu_samples  # a fixed subset, the same every epoch
        if self.bleu_scored and chosen.any():
            self._hypotheses.update(self._translate(batch, chosen, "validation", self.search_config.greedy))

    def on_test_epoch_start(self) -> None:
        self._hypotheses = {}

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._log_evaluation(batch, "test")
        self._hypotheses.update(self._translate(batch, slice(None), "test", self.search_config))

    def _score(self, split: str) -> tuple[list[tuple[str, list[str], str]], Scores]:
        """Log corpus BLEU/chrF of this epoch's hypotheses; return (source, references, hypothesis) rows."""
        hypotheses, (sources, references) = gathered(self._hypotheses), self.texts[split]
        rows = [(sources[i], references[i], hypotheses[i]) for i in sorted(hypotheses)]
        scores = corpus_scores([r[2] for r in rows], [r[1] for r in rows], self.pair.target)
        stage = "val" if split == "validation" else "test"
        self.log_dict({f"{stage}/bleu": scores.bleu, f"{stage}/chrf": scores.chrf}, prog_bar=True)
        return rows, scores

    def on_validation_epoch_end(self) -> None:
        if self.bleu_scored:  # else nothing new to log: early stopping and the samples wait for the next
            self.validation_rows, _ = self._score("validation")  # time to quality, samples: callbacks

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.check_finite()  # never save weights that a non-finite loss may have touched

    def on_test_epoch_end(self) -> None:
        self.test_result = self._score("test")  # written into the run folder by the TestReport callback

    # -- what the attention views draw (model/views/callback.py) -------------------------
    @torch.no_grad()
    def sentence_views(self, count: int) -> list[SentenceView]:
        """The first ``count`` readable validation sentences as the greedy search translates them now,
        with every attention weight of the ids it produced."""
        tokenizer, views = self.tokenizer, []
        for text, src_ids in self.readable_sources[:count]:
            src = torch.tensor([src_ids], device=self.device)
            output_ids = search(self.model, src, tokenizer.bos_id, tokenizer.eos_id, self.search_config.greedy)[0]
            translation = tokenizer.decode_tgt([output_ids], [text])[0]
            views.append(sentence_view(sentence_attention(self.model, src_ids, output_ids, tokenizer.bos_id),
                                       tokenizer.src_tokens, tokenizer.tgt_tokens, text, translation, self.pair.names))
        return views


def module_problems(settings: dict, prefix: str = "") -> list[str]:
    """What ``TranslationModule`` refuses among its plain ``settings``, one phrase each (the run machinery's
    settings check asks first, before any work)."""
    problems = []
    every, smoothing, samples = (settings.get(k) for k in ("val_bleu_every", "label_smoothing", "val_bleu_samples"))
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        problems.append(f"{prefix}val_bleu_every={every!r} must be a whole number >= 1")
    if smoothing is not None and (isinstance(smoothing, bool) or not isinstance(smoothing, (int, float))
                                  or not 0.0 <= smoothing < 1.0):
        problems.append(f"{prefix}label_smoothing={smoothing!r} must be in [0, 1)")
    if samples is not None and (isinstance(samples, bool) or not isinstance(samples, int) or samples < 0):
        problems.append(f"{prefix}val_bleu_samples={samples!r} must be a whole number >= 0")
    return problems
