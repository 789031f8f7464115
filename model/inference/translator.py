"""A trained run, loaded for translating: text in, text out, and the attention of any sentence.

This is where the model meets the tokenizer of ``data/`` at inference (training's counterpart
is the LightningModule, which is handed its tokenizer). The run's own settings apply unless the
caller overrides them: its search (``module.search``) and its source-length limit
(``data.max_sentence_len``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import torch

from data.sampler import pad_batch
from data.tokenizer import JOINT_FILE, TranslationTokenizer, tokenizer_fingerprint, truncate_source
from model.inference.run_folder import (RunLoadError, RunSettings, find_checkpoint, model_config, run_folder_of,
                                        run_settings)
from model.search import SearchConfig, beam_hypotheses, produced_ids, search, sentence_attention
from model.transformer import Seq2SeqTransformer
from model.views import SentenceView


@dataclass
class Translation:
    """One input line translated, with the ids on both sides (what its attention is computed for)."""

    source: str  # the line, stripped ("" for an empty line)
    text: str  # the Spanish translation, one line
    src_ids: list[int]  # as the model read them (truncated, ending in EOS); [] for an empty line
    output_ids: list[int]  # as the search produced them (EOS included when it ended)


@dataclass
class Translator:
    """A model, its tokenizer, the run's settings and a device."""

    model: Seq2SeqTransformer
    tokenizer: TranslationTokenizer
    device: torch.device
    settings: RunSettings = RunSettings()
    truncated: int = 0  # sources cut to the length limit so far

    @classmethod
    def load(cls, run: str | Path, device: str = "auto") -> "Translator":
        """A run folder (its final, else best, else last checkpoint) or one of its ``.ckpt`` files."""
        checkpoint, state = find_checkpoint(run)
        folder = run_folder_of(checkpoint)
        config = model_config(state, checkpoint)
        try:
            tokenizer = TranslationTokenizer.load(folder)
        except Exception as error:  # noqa: BLE001 — tokenizers raises plain Exceptions on a corrupt file
            raise RunLoadError(f"{folder / JOINT_FILE}: unusable tokenizer "
                               f"({str(error).splitlines()[0][:120]})") from None
        expected = state["hyper_parameters"].get("tokenizer_sha256")
        sizes = (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
        if sizes != (config.get("src_vocab_size"), config.get("tgt_vocab_size")) or (
            expected and expected != tokenizer_fingerprint(folder)
        ):
            raise RunLoadError(
                f"{folder / JOINT_FILE}: tokenizer does not match checkpoint {checkpoint} "
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
        return cls(model.to(target).eval(), tokenizer, target, run_settings(folder))

    @property
    def max_source_tokens(self) -> int:
        """The run's ``data.max_sentence_len`` (what it was trained on), never above the model's positions."""
        return min(self.settings.max_sentence_len or self.model.max_len, self.model.max_len)

    @property
    def max_source_chars(self) -> int:
        """Characters kept of a line before tokenizing: far more than fit the model, bounded memory."""
        return 16 * self.max_source_tokens

    def _autocast(self):
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Source ids, truncated to the length limit (EOS kept); counted in ``self.truncated``."""
        ids = self.tokenizer.encode_src([text[: self.max_source_chars] for text in texts])
        self.truncated += sum(len(seq) > self.max_source_tokens for seq in ids)
        return [truncate_source(seq, self.max_source_tokens) for seq in ids]

    @torch.no_grad()
    def translate(self, lines: list[str], config: SearchConfig | None = None,
                  batch_size: int = 64) -> list[Translation]:
        """Translate lines with ``config`` (default: the run's search): empty ones stay empty, the
        rest go in length-sorted batches."""
        config = config or self.settings.search
        results = [Translation("", "", [], []) for _ in lines]
        todo = [i for i, line in enumerate(lines) if line.strip()]
        ids = self.encode([lines[i].strip() for i in todo])
        order = sorted(range(len(todo)), key=lambda j: len(ids[j]))  # similar lengths batch together
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            src = pad_batch([ids[j] for j in batch], self.tokenizer.pad_id).to(self.device)
            with self._autocast():
                outputs = search(self.model, src, self.tokenizer.bos_id, self.tokenizer.eos_id, config)
            for j, output_ids, text in zip(batch, outputs, self.tokenizer.decode_tgt(outputs)):
                # Byte-level BPE can spell a line break; one sentence must stay one line.
                results[todo[j]] = Translation(lines[todo[j]].strip(), " ".join(text.splitlines()), ids[j], output_ids)
        return results

    @torch.no_grad()
    def n_best(self, translation: Translation, config: SearchConfig | None = None) -> list[tuple[str, float]]:
        """Every hypothesis the beam ended with for one translation, best first (the translation itself),
        with its length-normalized log-probability."""
        config = config or self.settings.search
        src = torch.tensor([translation.src_ids], device=self.device)
        with self._autocast():
            tokens, scores = beam_hypotheses(self.model, src, self.tokenizer.bos_id, self.tokenizer.eos_id, config)
        texts = self.tokenizer.decode_tgt(produced_ids(tokens[0], self.tokenizer.eos_id, self.tokenizer.pad_id))
        return [(" ".join(text.splitlines()), float(score)) for text, score in zip(texts, scores[0].tolist())]

    def sentence_view(self, translation: Translation) -> SentenceView:
        """Every attention weight of one translation, for exactly the ids its search produced, with
        the tokens of each axis."""
        attention = sentence_attention(self.model, translation.src_ids, translation.output_ids, self.tokenizer.bos_id)
        tokenizer = self.tokenizer
        return SentenceView(attention, tokenizer.src_tokens(attention.src_ids), tokenizer.tgt_tokens(attention.input_ids),
                            tokenizer.tgt_tokens(attention.output_ids), translation.source, translation.text)
