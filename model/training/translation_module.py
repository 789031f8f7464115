"""The LightningModule: where the model meets training — loss, learning-rate schedule, BLEU.

It wraps a plain ``Seq2SeqTransformer`` and gets everything else explicitly: the optimizer
and the learning-rate schedule as factories, the search settings as a ``SearchConfig``
(all built by Hydra from ``configs/module``), and in ``setup`` the tokenizer, sources and
references of the data module, read once. What validation draws (attention pictures, the
explorer page, statistics) is written by a callback, ``model/views/callback.py``, from
``sentence_views``.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Callable

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import Timer
from torch import Tensor

from model.search import SearchConfig, search, sentence_attention
from model.training.metrics import Scores, corpus_scores
from model.training.schedule import Schedule
from model.transformer import Seq2SeqTransformer
from model.views import SentenceView

log = logging.getLogger(__name__)
QUALITY_MARKS = (30, 40)  # validation BLEU marks whose first crossing is logged: time to quality


def label_smoothed_loss(logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor, Tensor]:
    """Mean label-smoothed cross-entropy; also the plain NLL (for perplexity) and accuracy.

    logits (N, V) and target (N,) of the real (non-padding) tokens. Same value as
    ``F.cross_entropy(label_smoothing=ε)``, from one log-softmax so the NLL comes free.
    """
    log_probs = logits.float().log_softmax(dim=-1)  # (N, V)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (N,)
    uniform = -log_probs.mean(dim=-1)  # cross-entropy with the uniform distribution
    loss = ((1.0 - smoothing) * nll + smoothing * uniform).mean()
    accuracy = (logits.argmax(dim=-1) == target).float().mean()
    return loss, nll.mean(), accuracy


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or inf: going on would only write broken weights."""


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
        model_config: dict | None = None,
        tokenizer_sha256: str | None = None,
    ) -> None:
        super().__init__()
        # Plain values only (no modules, no callables): checkpoints stay loadable with weights_only=True.
        self.save_hyperparameters(ignore=["model", "optimizer", "schedule", "search"])
        self.model, self.optimizer_factory, self.schedule = model, optimizer, schedule
        self.search_config = search  # test: as configured; validation: greedy, same length limits
        self.tokenizer = None
        self.texts: dict[str, tuple[list[str], list[list[str]]]] = {}  # split -> (sources, references)
        self.readable_sources: list[tuple[str, list[int]]] = []  # (text, ids): validation sentences to draw
        self._last_batch_time: float | None = None
        self._train_started: float | None = None
        self.reached: dict[str, list[float]] = {}  # mark -> [step, training minutes] when val BLEU first reached it
        self._hypotheses: dict[int, str] = {}

    def setup(self, stage: str) -> None:
        """Read what evaluation needs from the data module, once."""
        if self.tokenizer is not None:
            return
        datamodule = self.trainer.datamodule
        self.tokenizer = datamodule.tokenizer
        self.texts = {split: (datamodule.sources(split), datamodule.references(split))
                      for split in ("validation", "test")}
        # Validation sentences of a readable length (5-12 source tokens), in a fixed order.
        texts, src_ids = self.texts["validation"][0], datamodule.splits["validation"]["src_ids"]
        self.readable_sources = [(text, ids) for text, ids in zip(texts, src_ids) if 5 <= len(ids) <= 12]

    # -- training -------------------------------------------------------------------------
    def _step(self, batch: dict[str, Tensor], stage: str) -> Tensor:
        real = batch["tgt_out"] != self.model.pad_id  # logits only where there is a target token
        logits = self.model(batch["src"], batch["tgt_in"], output_mask=real)  # (N, vocab)
        loss, nll, accuracy = label_smoothed_loss(logits, batch["tgt_out"][real], self.hparams.label_smoothing)
        on_step = stage == "train"
        metrics = {f"{stage}/loss": loss, f"{stage}/ppl": nll.exp(), f"{stage}/accuracy": accuracy}
        self.log_dict(metrics, prog_bar=on_step, on_step=on_step, on_epoch=not on_step,
                      batch_size=batch["src"].size(0), sync_dist=not on_step)
        return loss

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss = self._step(batch, "train")
        if not torch.isfinite(loss):  # stop before the update: the weights are still the last good ones
            raise NonFiniteLossError(f"the training loss is {loss.item()} at step {self.global_step}")
        now = time.perf_counter()
        metrics = {"train/lr": self.optimizers().param_groups[0]["lr"]}
        if self._last_batch_time is not None:  # tokens of this batch over the time since the last one
            tokens = (batch["src"] != self.model.pad_id).sum() + (batch["tgt_out"] != self.model.pad_id).sum()
            metrics["train/tokens_per_s"] = tokens.float() / (now - self._last_batch_time)
        self._last_batch_time = now
        self.log_dict(metrics, on_step=True, batch_size=1)
        return loss

    def _timer(self) -> Timer | None:
        trainer = self._trainer  # None outside a Trainer (where self.trainer would raise)
        return next((c for c in trainer.callbacks if isinstance(c, Timer)), None) if trainer is not None else None

    def on_train_start(self) -> None:
        self._train_started = time.perf_counter()

    def training_minutes(self) -> float:
        """Wall-clock minutes of training so far (validations included): the Timer's, which continues across
        a resume, else since this fit started."""
        timer = self._timer()
        if timer is not None and timer.start_time("train") is not None:
            return timer.time_elapsed("train") / 60
        return (time.perf_counter() - self._train_started) / 60 if self._train_started is not None else 0.0

    def training_progress(self) -> float | None:
        """Share of the training budget spent, 0 → 1: elapsed time over ``trainer.max_time`` or
        steps over ``trainer.max_steps``, whichever is further; ``None`` without a budget."""
        trainer = self._trainer  # None outside a Trainer (where self.trainer would raise)
        if trainer is None:
            return None
        shares = []
        timer = self._timer()
        if timer is not None and timer.time_remaining() is not None:
            elapsed = timer.time_elapsed("train")  # continues across a resume (the Timer's state)
            shares.append(elapsed / max(elapsed + timer.time_remaining(), 1e-9))
        if trainer.max_steps > 0:
            shares.append(self.global_step / trainer.max_steps)
        if not shares:
            return None
        # Every rank must use the same learning rate, or the replicas' weights drift apart.
        return trainer.strategy.broadcast(min(max(shares), 1.0))

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        """Clip as configured. bf16 autocast has no loss scaler: its gradients are the true ones and
        clipping them is right, also with a fused AdamW, which Lightning's mixed-precision plugin
        refuses for the sake of fp16's scaled gradients. So without a scaler we clip ourselves."""
        if gradient_clip_val and getattr(self.trainer.precision_plugin, "scaler", None) is None:
            if gradient_clip_algorithm in (None, "norm"):
                torch.nn.utils.clip_grad_norm_(self.parameters(), gradient_clip_val)
            else:
                torch.nn.utils.clip_grad_value_(self.parameters(), gradient_clip_val)
            return
        self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = self.optimizer_factory(self.model.parameters())
        # Called after every update with the next step's number; the progress is read then.
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: self.schedule(step, self.training_progress()))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # -- validation: loss + greedy BLEU on a fixed subset + attention maps; test: beam ----
    def _translate(self, src: Tensor, config: SearchConfig) -> list[str]:
        return self.tokenizer.decode_tgt(search(self.model, src, self.tokenizer.bos_id, self.tokenizer.eos_id, config))

    def on_validation_epoch_start(self) -> None:
        self._hypotheses = {}
        self._last_batch_time = None  # validation time is not training throughput

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")
        chosen = batch["index"] < self.hparams.val_bleu_samples  # a fixed subset, the same every epoch
        if chosen.any():
            texts = self._translate(batch["src"][chosen], self.search_config.greedy)
            self._hypotheses.update(zip(batch["index"][chosen].tolist(), texts))

    def on_test_epoch_start(self) -> None:
        self._hypotheses = {}

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "test")
        self._hypotheses.update(zip(batch["index"].tolist(), self._translate(batch["src"], self.search_config)))

    def _gathered_hypotheses(self) -> dict[int, str]:
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            parts: list[dict[int, str]] = [{} for _ in range(dist.get_world_size())]
            dist.all_gather_object(parts, self._hypotheses)
            return {k: v for part in parts for k, v in part.items()}
        return self._hypotheses

    def _score(self, split: str) -> tuple[list[tuple[str, list[str], str]], Scores]:
        """Log corpus BLEU/chrF of this epoch's hypotheses; return (source, references, hypothesis) rows."""
        hypotheses, (sources, references) = self._gathered_hypotheses(), self.texts[split]
        rows = [(sources[i], references[i], hypotheses[i]) for i in sorted(hypotheses)]
        scores = corpus_scores([r[2] for r in rows], [r[1] for r in rows])
        stage = "val" if split == "validation" else "test"
        self.log_dict({f"{stage}/bleu": scores.bleu, f"{stage}/chrf": scores.chrf}, prog_bar=True)
        return rows, scores

    def on_validation_epoch_end(self) -> None:
        rows, scores = self._score("validation")
        if self.trainer.sanity_checking:
            return
        minutes = self.training_minutes()
        self.log("val/minutes", minutes)  # beside val/bleu: time to quality in metrics.csv and wandb
        for mark in QUALITY_MARKS:
            if str(mark) not in self.reached and scores.bleu >= mark:
                self.reached[str(mark)] = [self.global_step, minutes]
                if self.trainer.is_global_zero:
                    log.info("validation BLEU reached %d at step %d, %.1f minutes into training",
                             mark, self.global_step, minutes)
        if not self.trainer.is_global_zero:
            return
        table = [[source, " | ".join(refs), hypothesis] for source, refs, hypothesis in rows[:20]]
        for logger in self.loggers:
            if type(logger).__name__ == "WandbLogger":
                logger.log_table(key="val/translations", columns=["source", "references", "hypothesis"], data=table)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["quality_marks_reached"] = self.reached  # a resumed run still knows when it got there

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.reached = dict(checkpoint.get("quality_marks_reached", {}))

    def on_test_epoch_end(self) -> None:
        rows, scores = self._score("test")
        if not self.trainer.is_global_zero:
            return
        run_dir = Path(self.trainer.default_root_dir)
        (run_dir / "test_metrics.json").write_text(json.dumps({
            "bleu": scores.bleu, "chrf": scores.chrf, "bleu_signature": scores.bleu_signature,
            "chrf_signature": scores.chrf_signature, "sentences": len(rows),
            "beam_size": self.search_config.beam_size, "length_penalty": self.search_config.length_penalty,
            "validation_bleu_reached": {mark: {"step": int(step), "minutes": round(minutes, 2)}
                                        for mark, (step, minutes) in self.reached.items()},
        }, indent=2))
        with open(run_dir / "test_translations.tsv", "w", encoding="utf-8") as out:
            for source, refs, hypothesis in rows:
                out.write(f"{source}\t{hypothesis}\t{' | '.join(refs)}\n")

    # -- what the attention views draw (model/views/callback.py) -------------------------
    @torch.no_grad()
    def sentence_views(self, count: int) -> list[SentenceView]:
        """The first ``count`` readable validation sentences as the greedy search translates them now,
        with every attention weight of the ids it produced."""
        tokenizer, views = self.tokenizer, []
        for text, src_ids in self.readable_sources[:count]:
            src = torch.tensor([src_ids], device=self.device)
            output_ids = search(self.model, src, tokenizer.bos_id, tokenizer.eos_id, self.search_config.greedy)[0]
            attention = sentence_attention(self.model, src_ids, output_ids, tokenizer.bos_id)
            views.append(SentenceView(attention, tokenizer.src_tokens(src_ids), tokenizer.tgt_tokens(attention.input_ids),
                                      tokenizer.tgt_tokens(output_ids), text, tokenizer.decode_tgt([output_ids])[0]))
        return views
