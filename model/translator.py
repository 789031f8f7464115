"""Load a trained run (checkpoint + tokenizer) safely and translate text with it.

Not part of the tensor-only core: this is the one module of ``model/`` where the model
meets the tokenizer of ``data/`` (training's counterpart is the LightningModule, which is
handed its tokenizer). Checkpoints are read with ``torch.load(weights_only=True)``:
tensors and plain values only, never arbitrary objects.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from data.sampler import pad_batch
from data.tokenizer import JOINT_FILE, SRC_FILE, TranslationTokenizer, tokenizer_fingerprint, truncate_source
from model.explorer import sentence_record, write_explorer
from model.plotting import ATTENTION_TITLES, attention_figures, save_figure
from model.search import SearchConfig, SentenceAttention, search
from model.transformer import Seq2SeqTransformer

log = logging.getLogger(__name__)
CHECKPOINT_PREFERENCE = ("final.ckpt", "best.ckpt", "last.ckpt")


class RunLoadError(RuntimeError):
    """A run folder, checkpoint or tokenizer that cannot be used, with the file it is about."""


def find_checkpoint(run: str | Path) -> Path:
    """A checkpoint file as given, or the preferred one in ``<run>/checkpoints/``."""
    run = Path(run)
    if run.is_file():
        return run
    if not run.exists():
        raise RunLoadError(f"{run}: no such run folder or checkpoint")
    for name in CHECKPOINT_PREFERENCE:
        if (run / "checkpoints" / name).is_file():
            return run / "checkpoints" / name
    raise RunLoadError(f"{run / 'checkpoints'}: no checkpoint (expected one of {', '.join(CHECKPOINT_PREFERENCE)})")


def find_tokenizer_folder(checkpoint: Path) -> Path:
    """``tokenizer.json`` sits in the run folder, the checkpoint's grandparent (or beside it)."""
    for folder in (checkpoint.parent.parent, checkpoint.parent):
        if (folder / JOINT_FILE).is_file() or (folder / SRC_FILE).is_file():
            return folder
    raise RunLoadError(f"{checkpoint.parent.parent / JOINT_FILE}: tokenizer missing for checkpoint {checkpoint}")


@dataclass
class Translator:
    """A model, its tokenizer and a device: text in, text out."""

    model: Seq2SeqTransformer
    tokenizer: TranslationTokenizer
    device: torch.device

    @classmethod
    def load(cls, run: str | Path, device: str = "auto") -> "Translator":
        checkpoint = find_checkpoint(run)
        tokenizer_folder = find_tokenizer_folder(checkpoint)
        try:
            state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        except Exception as error:  # noqa: BLE001 — any unreadable or unsafe file: one clear line
            raise RunLoadError(f"{checkpoint}: not a loadable checkpoint ({type(error).__name__})") from None
        hparams = state.get("hyper_parameters", {})
        if "model_config" not in hparams or "state_dict" not in state:
            raise RunLoadError(f"{checkpoint}: not a checkpoint of this project (no model_config / state_dict)")
        config = dict(hparams["model_config"])
        try:
            tokenizer = TranslationTokenizer.load(tokenizer_folder)
        except (OSError, ValueError) as error:
            raise RunLoadError(f"{tokenizer_folder}: unusable tokenizer ({error})") from None
        expected = hparams.get("tokenizer_sha256")
        sizes = (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
        if sizes != (config["src_vocab_size"], config["tgt_vocab_size"]) or (
            expected and expected != tokenizer_fingerprint(tokenizer_folder)
        ):
            raise RunLoadError(
                f"{tokenizer_folder / JOINT_FILE}: tokenizer does not match checkpoint {checkpoint} "
                f"(vocabulary {sizes} vs {(config['src_vocab_size'], config['tgt_vocab_size'])})"
            )
        model = Seq2SeqTransformer(**config)
        weights = {k.removeprefix("model."): v for k, v in state["state_dict"].items()}
        model.load_state_dict(weights)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        target = torch.device(device)
        return cls(model.to(target).eval(), tokenizer, target)

    @property
    def max_source_tokens(self) -> int:
        return self.model.max_len

    def _autocast(self):
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def encode(self, texts: list[str]) -> tuple[list[list[int]], int]:
        """Source ids, truncated to the model's length limit (EOS kept); also how many were cut."""
        ids = self.tokenizer.encode_src(texts)
        truncated = sum(len(seq) > self.max_source_tokens for seq in ids)
        return [truncate_source(seq, self.max_source_tokens) for seq in ids], truncated

    @torch.no_grad()
    def translate_ids(self, ids: list[list[int]], config: SearchConfig,
                      attention_rows: tuple[int, ...] = ()) -> tuple[list[str], dict[int, SentenceAttention]]:
        """One batch of source ids -> Spanish strings, and the attention of the rows asked for."""
        src = pad_batch(ids, self.tokenizer.pad_id).to(self.device)
        with self._autocast():
            output = search(self.model, src, self.tokenizer.bos_id, self.tokenizer.eos_id, config, attention_rows)
        # Byte-level BPE can spell a line break; one sentence must stay one line.
        texts = [" ".join(t.splitlines()) for t in self.tokenizer.decode_tgt(output.ids)]
        return texts, output.attention

    def draw_attention(self, sentence: SentenceAttention, source: str, translation: str, path: str | Path,
                       every_layer: bool = False) -> list[Path]:
        """Draw one translated sentence's attention: ``.html`` -> the interactive explorer (every
        kind, layer and head); else a PNG of the cross-attention (last layer's heads), or with
        ``every_layer`` all layers plus ``<stem>_encoder_self.png`` and ``<stem>_decoder_self.png``.
        """
        path, tokenizer = Path(path), self.tokenizer
        labels = (tokenizer.src_tokens(sentence.src_ids), tokenizer.tgt_tokens(sentence.input_ids),
                  tokenizer.tgt_tokens(sentence.output_ids))
        if path.suffix.lower() in (".html", ".htm"):
            record = sentence_record(sentence, *labels, source, translation)
            return [write_explorer(path, [{"label": "translation", "sentences": [record]}], f"{source} → {translation}")]
        kinds = tuple(ATTENTION_TITLES) if every_layer else ("cross",)
        figures = attention_figures(sentence.maps, *labels, caption=f": {source!r} → {translation!r}", kinds=kinds,
                                    last_layer_only=not every_layer)
        written = []
        for kind, figure in figures.items():
            target = path if kind == "cross" else path.with_name(f"{path.stem}_{kind}{path.suffix}")
            save_figure(figure, target)
            written.append(target)
        return written
