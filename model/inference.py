"""Load a trained run (checkpoint + tokenizer) safely and translate text with it.

Not part of the tensor-only core: this is where the model meets the tokenizer, like
``model/translator.py`` does for training. Checkpoints are read with
``torch.load(weights_only=True)``: tensors and plain values only, never arbitrary objects.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from data.sampler import pad_batch
from data.tokenizer import JOINT_FILE, SRC_FILE, TranslationTokenizer
from matplotlib.figure import Figure

from model.plotting import ATTENTION_TITLES, attention_grid, save_figure
from model.search import beam_search, greedy_decode, strip_special
from model.transformer import Seq2SeqTransformer

log = logging.getLogger(__name__)
CHECKPOINT_PREFERENCE = ("final.ckpt", "best.ckpt", "last.ckpt")


class RunLoadError(RuntimeError):
    """A run folder, checkpoint or tokenizer that cannot be used, with the file it is about."""


def tokenizer_fingerprint(folder: str | Path) -> str:
    """sha256 of the tokenizer file(s): stored in checkpoints so a mismatch is caught."""
    folder = Path(folder)
    files = [folder / JOINT_FILE] if (folder / JOINT_FILE).is_file() else sorted(folder.glob("tokenizer.*.json"))
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return digest.hexdigest()


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


@torch.no_grad()
def attention_figures(
    model: Seq2SeqTransformer,
    tokenizer: TranslationTokenizer,
    text: str,
    src_ids: list[int],
    output_ids: list[int],
    caption: str = "",
    kinds: tuple[str, ...] = tuple(ATTENTION_TITLES),
    last_layer_only: bool = False,
) -> dict[str, Figure]:
    """Attention grids (layers x heads) of one sentence pair, tokens on the axes.

    ``output_ids``: the translation's ids ending with EOS (the decoder's outputs); its
    input is BOS + all but the last. Rows are queries: output tokens for the decoder
    maps, source tokens for the encoder's.
    """
    device = next(model.parameters()).device
    tgt_in = [tokenizer.bos_id] + output_ids[:-1]
    maps = model.attention_maps(torch.tensor([src_ids], device=device), torch.tensor([tgt_in], device=device))
    src_tokens, out_tokens = tokenizer.src_tokens(text), tokenizer.tgt_tokens(output_ids)
    axes = {"encoder_self": (src_tokens, src_tokens), "decoder_self": (out_tokens, tokenizer.tgt_tokens(tgt_in)),
            "cross": (out_tokens, src_tokens)}
    figures = {}
    for kind in kinds:
        layers = [m[0] for m in getattr(maps, kind)]  # per layer (heads, Lq, Lk)
        first_layer = len(layers) if last_layer_only else 1
        layers = layers[first_layer - 1 :]
        figures[kind] = attention_grid(layers, *axes[kind], ATTENTION_TITLES[kind] + caption, first_layer=first_layer)
    return figures


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
        limit, truncated, ids = self.max_source_tokens, 0, []
        for seq in self.tokenizer.encode_src(texts):
            if len(seq) > limit:
                seq, truncated = seq[: limit - 1] + seq[-1:], truncated + 1
            ids.append(seq)
        return ids, truncated

    @torch.no_grad()
    def translate_ids(self, ids: list[list[int]], beam_size: int = 5, length_penalty: float = 0.6,
                      max_len_a: float = 1.5, max_len_b: int = 10) -> list[str]:
        """One batch of source ids -> Spanish strings."""
        src = pad_batch(ids, self.tokenizer.pad_id).to(self.device)
        bos, eos = self.tokenizer.bos_id, self.tokenizer.eos_id
        with self._autocast():
            if beam_size > 1:
                tokens, _ = beam_search(self.model, src, bos, eos, beam_size, length_penalty, max_len_a, max_len_b)
            else:
                tokens = greedy_decode(self.model, src, bos, eos, max_len_a, max_len_b)
        texts = self.tokenizer.decode_tgt(strip_special(tokens, eos, self.tokenizer.pad_id))
        # Byte-level BPE can spell a line break; one sentence must stay one line.
        return [" ".join(t.splitlines()) for t in texts]

    @torch.no_grad()
    def draw_attention(self, text: str, path: str | Path, every_layer: bool = False, **search) -> list[Path]:
        """Translate ``text`` and draw its cross-attention (last layer's heads) to ``path``.

        ``every_layer``: all layers and heads, plus ``<stem>_encoder_self.png`` and
        ``<stem>_decoder_self.png`` beside it.
        """
        path = Path(path)
        ids, _ = self.encode([text])
        translation = self.translate_ids(ids, **search)[0]
        output = self.tokenizer.encode_tgt([translation])[0] + [self.tokenizer.eos_id]
        kinds = tuple(ATTENTION_TITLES) if every_layer else ("cross",)
        figures = attention_figures(self.model, self.tokenizer, text, ids[0], output,
                                    caption=f": {text!r} → {translation!r}", kinds=kinds,
                                    last_layer_only=not every_layer)
        written = []
        for kind, figure in figures.items():
            target = path if kind == "cross" else path.with_name(f"{path.stem}_{kind}{path.suffix}")
            save_figure(figure, target)
            written.append(target)
        return written
