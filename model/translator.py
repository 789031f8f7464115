"""The LightningModule: where the model meets training — loss, schedule, BLEU, attention maps.

It wraps a plain ``Seq2SeqTransformer`` (built by Hydra from ``configs/model``) and reads
the tokenizer and references from the data module attached to the trainer.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable

import lightning as L
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from model.metrics import corpus_scores
from model.inference import attention_figures
from model.plotting import save_figure
from model.search import beam_search, greedy_decode, strip_special
from model.transformer import Seq2SeqTransformer


def inverse_sqrt_schedule(warmup_steps: int) -> Callable[[int], float]:
    """LR multiplier: linear warm-up to 1 over ``warmup_steps``, then 1/√step decay (Vaswani et al.)."""

    def factor(step: int) -> float:
        step = max(step, 1)
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

    return factor


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


class TranslationModule(L.LightningModule):
    """Trains a ``Seq2SeqTransformer`` and scores it with sacreBLEU."""

    def __init__(
        self,
        model: Seq2SeqTransformer,
        optimizer: Callable[..., torch.optim.Optimizer],
        warmup_steps: int = 1000,
        label_smoothing: float = 0.1,
        val_bleu_samples: int = 500,
        attention_samples: int = 3,
        beam_size: int = 5,
        length_penalty: float = 0.6,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
        model_config: dict | None = None,
        tokenizer_sha256: str | None = None,
    ) -> None:
        super().__init__()
        # Plain values only (no modules, no callables): checkpoints stay loadable with weights_only=True.
        self.save_hyperparameters(ignore=["model", "optimizer"])
        self.model, self.optimizer_factory = model, optimizer
        self._last_batch_time: float | None = None
        self._hypotheses: dict[int, str] = {}

    # -- training -------------------------------------------------------------------------
    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        return self.model(src, tgt_in)

    def _step(self, batch: dict[str, Tensor], stage: str) -> Tensor:
        real = batch["tgt_out"] != self.model.pad_id  # logits only where there is a target token
        logits = self.model(batch["src"], batch["tgt_in"], positions=real)  # (N, vocab)
        loss, nll, accuracy = label_smoothed_loss(logits, batch["tgt_out"][real], self.hparams.label_smoothing)
        n = batch["src"].size(0)
        on_step = stage == "train"
        self.log(f"{stage}/loss", loss, prog_bar=True, on_step=on_step, on_epoch=not on_step, batch_size=n,
                 sync_dist=not on_step)
        self.log(f"{stage}/ppl", nll.exp(), on_step=on_step, on_epoch=not on_step, batch_size=n, sync_dist=not on_step)
        self.log(f"{stage}/accuracy", accuracy, on_step=on_step, on_epoch=not on_step, batch_size=n,
                 sync_dist=not on_step)
        return loss

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss = self._step(batch, "train")
        now = time.perf_counter()
        if self._last_batch_time is not None:  # tokens of this batch over the time since the last one
            tokens = (batch["src"] != self.model.pad_id).sum() + (batch["tgt_out"] != self.model.pad_id).sum()
            self.log("train/tokens_per_s", tokens.float() / (now - self._last_batch_time), prog_bar=True,
                     on_step=True, batch_size=1)
        self._last_batch_time = now
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], on_step=True, batch_size=1)
        return loss

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = self.optimizer_factory(self.model.parameters())
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt_schedule(self.hparams.warmup_steps))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # -- validation: loss + greedy BLEU on a fixed subset + attention maps ----------------
    def on_validation_epoch_start(self) -> None:
        self._hypotheses = {}
        self._last_batch_time = None  # validation time is not training throughput

    def _decode(self, src: Tensor, beam: bool) -> list[str]:
        tokenizer = self.trainer.datamodule.tokenizer
        if beam:
            tokens, _ = beam_search(self.model, src, tokenizer.bos_id, tokenizer.eos_id, self.hparams.beam_size,
                                    self.hparams.length_penalty, self.hparams.max_len_a, self.hparams.max_len_b)
        else:
            tokens = greedy_decode(self.model, src, tokenizer.bos_id, tokenizer.eos_id, self.hparams.max_len_a,
                                   self.hparams.max_len_b)
        return tokenizer.decode_tgt(strip_special(tokens, tokenizer.eos_id, tokenizer.pad_id))

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")
        chosen = batch["index"] < self.hparams.val_bleu_samples  # a fixed subset, the same every epoch
        if chosen.any():
            texts = self._decode(batch["src"][chosen], beam=False)
            self._hypotheses.update(zip(batch["index"][chosen].tolist(), texts))

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "test")
        self._hypotheses.update(zip(batch["index"].tolist(), self._decode(batch["src"], beam=True)))

    def on_test_epoch_start(self) -> None:
        self._hypotheses = {}

    def _gathered_hypotheses(self) -> dict[int, str]:
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            parts: list[dict[int, str]] = [{} for _ in range(dist.get_world_size())]
            dist.all_gather_object(parts, self._hypotheses)
            return {k: v for part in parts for k, v in part.items()}
        return self._hypotheses

    def _score(self, split: str) -> dict[str, Any]:
        hypotheses = self._gathered_hypotheses()
        datamodule = self.trainer.datamodule
        rows = sorted(hypotheses)
        references, sources = datamodule.references(split), datamodule.sources(split)
        scores = corpus_scores([hypotheses[i] for i in rows], [references[i] for i in rows])
        stage = "val" if split == "validation" else "test"
        self.log(f"{stage}/bleu", scores.bleu, prog_bar=True)
        self.log(f"{stage}/chrf", scores.chrf)
        return {"rows": rows, "hypotheses": hypotheses, "references": references, "sources": sources,
                "scores": scores}

    def on_validation_epoch_end(self) -> None:
        result = self._score("validation")
        if self.trainer.sanity_checking or not self.trainer.is_global_zero:
            return
        table = [[result["sources"][i], " | ".join(result["references"][i]), result["hypotheses"][i]]
                 for i in result["rows"][:20]]
        self._log_table("val/translations", ["source", "references", "hypothesis"], table)
        self.log_attention_maps()

    def on_test_epoch_end(self) -> None:
        result = self._score("test")
        if not self.trainer.is_global_zero:
            return
        run_dir = Path(self.trainer.default_root_dir)
        scores = result["scores"]
        (run_dir / "test_metrics.json").write_text(json.dumps({
            "bleu": scores.bleu, "chrf": scores.chrf, "bleu_signature": scores.bleu_signature,
            "chrf_signature": scores.chrf_signature, "sentences": len(result["rows"]),
            "beam_size": self.hparams.beam_size, "length_penalty": self.hparams.length_penalty,
        }, indent=2))
        with open(run_dir / "test_translations.tsv", "w", encoding="utf-8") as out:
            for i in result["rows"]:
                out.write(f"{result['sources'][i]}\t{result['hypotheses'][i]}\t{' | '.join(result['references'][i])}\n")

    # -- attention maps -------------------------------------------------------------------
    def attention_rows(self) -> list[int]:
        """A fixed handful of validation sentences of readable length (5-12 source tokens)."""
        src_ids = self.trainer.datamodule.splits["validation"]["src_ids"]
        rows = [i for i, ids in enumerate(src_ids) if 5 <= len(ids) <= 12]
        return rows[: self.hparams.attention_samples]

    @torch.no_grad()
    def log_attention_maps(self) -> list[Path]:
        """Plot encoder self, decoder masked self and cross attention for the fixed sentences.

        PNGs go to ``<run>/attention/step_<N>/``; wandb gets them under stable keys
        ``attention/<kind>/sentence_<n>`` (a panel with a step slider), TensorBoard as figures.
        """
        datamodule = self.trainer.datamodule
        tokenizer = datamodule.tokenizer
        folder = Path(self.trainer.default_root_dir) / "attention" / f"step_{self.global_step:06d}"
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for n, row in enumerate(self.attention_rows()):
            src_ids = datamodule.splits["validation"]["src_ids"][row]
            src = torch.tensor([src_ids], device=self.device)
            output = greedy_decode(self.model, src, tokenizer.bos_id, tokenizer.eos_id)[0].tolist()
            output = output[: output.index(tokenizer.eos_id) + 1] if tokenizer.eos_id in output else output
            figures = attention_figures(self.model, tokenizer, datamodule.sources("validation")[row], src_ids, output,
                                        caption=f" · step {self.global_step} · rows = queries")
            for kind, figure in figures.items():
                path = folder / f"{kind}_sentence{n}.png"
                save_figure(figure, path)
                written.append(path)
                self._log_image(f"attention/{kind}/sentence_{n}", path)
        return written

    def _log_image(self, key: str, path: Path) -> None:
        for logger in self.loggers:
            if type(logger).__name__ == "WandbLogger":
                logger.log_image(key=key, images=[str(path)])
            elif type(logger).__name__ == "TensorBoardLogger":
                import matplotlib.image as mpimg

                logger.experiment.add_image(key, mpimg.imread(path)[..., :3], self.global_step, dataformats="HWC")

    def _log_table(self, key: str, columns: list[str], data: list[list[str]]) -> None:
        for logger in self.loggers:
            if type(logger).__name__ == "WandbLogger":
                logger.log_table(key=key, columns=columns, data=data)
