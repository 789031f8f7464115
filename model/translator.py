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
from model.checkpoints import finite_weights
from model.explorer import sentence_record, write_explorer
from model.plotting import ATTENTION_TITLES, attention_figures, save_figure
from model.search import SearchConfig, SentenceAttention, search
from model.transformer import Seq2SeqTransformer

log = logging.getLogger(__name__)
CHECKPOINT_PREFERENCE = ("final.ckpt", "best.ckpt", "last.ckpt")


class RunLoadError(RuntimeError):
    """A run folder, checkpoint or tokenizer that cannot be used, with the file it is about."""


def read_checkpoint(path: Path) -> dict:
    """A checkpoint's contents, read safely (tensors and plain values only) and checked: a dict
    of this project with finite weights. Anything else is a ``RunLoadError`` naming the file."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 — any unreadable, truncated or unsafe file: one clear line
        raise RunLoadError(f"{path}: not a loadable checkpoint ({type(error).__name__})") from None
    hparams = state.get("hyper_parameters") if isinstance(state, dict) else None
    if not isinstance(hparams, dict) or "model_config" not in hparams or "state_dict" not in state:
        raise RunLoadError(f"{path}: not a checkpoint of this project (no model_config / state_dict)")
    if not finite_weights(state["state_dict"]):
        raise RunLoadError(f"{path}: weights are not finite (NaN or inf): the training diverged")
    return state


def find_checkpoint(run: str | Path) -> tuple[Path, dict]:
    """A checkpoint file as given, or the first usable one in ``<run>/checkpoints/`` in the order
    final, best, last; an unusable one is skipped with a warning. Returns the path and contents."""
    run = Path(run)
    if run.is_file():
        return run, read_checkpoint(run)
    if not run.exists():
        raise RunLoadError(f"{run}: no such run folder or checkpoint")
    problem = None
    for path in (run / "checkpoints" / name for name in CHECKPOINT_PREFERENCE):
        if not path.is_file():
            continue
        try:
            state = read_checkpoint(path)
        except RunLoadError as error:
            log.warning("%s; trying the next checkpoint", error)
            problem = error
            continue
        return path, state
    raise problem or RunLoadError(
        f"{run / 'checkpoints'}: no checkpoint (expected one of {', '.join(CHECKPOINT_PREFERENCE)})")


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
    truncated: int = 0  # sources cut to the model's length limit so far

    @classmethod
    def load(cls, run: str | Path, device: str = "auto") -> "Translator":
        checkpoint, state = find_checkpoint(run)
        tokenizer_folder = find_tokenizer_folder(checkpoint)
        config = dict(state["hyper_parameters"]["model_config"])
        try:
            tokenizer = TranslationTokenizer.load(tokenizer_folder)
        except Exception as error:  # noqa: BLE001 — tokenizers raises plain Exceptions on a corrupt file
            raise RunLoadError(f"{tokenizer_folder / JOINT_FILE}: unusable tokenizer "
                               f"({str(error).splitlines()[0][:120]})") from None
        expected = state["hyper_parameters"].get("tokenizer_sha256")
        sizes = (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
        if sizes != (config.get("src_vocab_size"), config.get("tgt_vocab_size")) or (
            expected and expected != tokenizer_fingerprint(tokenizer_folder)
        ):
            raise RunLoadError(
                f"{tokenizer_folder / JOINT_FILE}: tokenizer does not match checkpoint {checkpoint} "
                f"(vocabulary {sizes} vs {(config.get('src_vocab_size'), config.get('tgt_vocab_size'))})"
            )
        try:
            model = Seq2SeqTransformer(**config)
            model.load_state_dict({k.removeprefix("model."): v for k, v in state["state_dict"].items()})
        except (TypeError, ValueError, RuntimeError) as error:
            raise RunLoadError(f"{checkpoint}: its weights do not fit its model_config "
                               f"({str(error).splitlines()[0][:160]})") from None
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        target = torch.device(device)
        return cls(model.to(target).eval(), tokenizer, target)

    @property
    def max_source_tokens(self) -> int:
        return self.model.max_len

    @property
    def max_source_chars(self) -> int:
        """Characters kept of a line before tokenizing: far more than fit the model, bounded memory."""
        return 16 * self.model.max_len

    def _autocast(self):
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Source ids, truncated to the model's length limit (EOS kept); counted in ``self.truncated``."""
        ids = self.tokenizer.encode_src([text[: self.max_source_chars] for text in texts])
        self.truncated += sum(len(seq) > self.max_source_tokens for seq in ids)
        return [truncate_source(seq, self.max_source_tokens) for seq in ids]

    def translate_lines(self, lines: list[str], search: SearchConfig, batch_size: int = 64,
                        attention_line: int | None = None) -> tuple[list[str], SentenceAttention | None]:
        """Translate lines: empty ones stay empty, the rest go in length-sorted batches.

        ``attention_line``: the line whose attention weights to return, from the same search
        that produced its translation.
        """
        outputs, attention = [""] * len(lines), None
        todo = [i for i, line in enumerate(lines) if line.strip()]
        ids = self.encode([lines[i].strip() for i in todo])
        order = sorted(range(len(todo)), key=lambda j: len(ids[j]))  # similar lengths batch together
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            wanted = tuple(k for k, j in enumerate(batch) if todo[j] == attention_line)
            texts, maps = self.translate_ids([ids[j] for j in batch], search, wanted)
            for j, text in zip(batch, texts):
                outputs[todo[j]] = text
            attention = maps[wanted[0]] if wanted else attention
        return outputs, attention

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
