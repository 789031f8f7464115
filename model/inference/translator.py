"""A trained run, loaded for translating: text in, text out, and the attention of any sentence.

This is where the model meets the tokenizer of ``data/`` at inference (training's counterpart
is the LightningModule, which is handed its tokenizer), and the one inference pipeline: reading
lines, tokenizing, batching by length, text, n-best and attention are written here once; the search
behind them is a backend (``search_backends.py``: ours or CTranslate2's). The run's own settings
apply unless the caller overrides them: its search (``module.search``) and its source-length limit
(``data.max_sentence_len``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from data.lines import clean_text
from data.tokenizer import JOINT_FILE, TranslationTokenizer, tokenizer_fingerprint, truncate_source
from model.inference.run_folder import RunFiles, RunLoadError, RunSettings, model_config, open_run
from model.inference.search_backends import (CTranslate2Search, OurSearch, SearchBackend, TransformersSearch,
                                             check_engine)
from model.search import KeepRows, SearchConfig, sentence_attention
from model.transformer import Seq2SeqTransformer
from model.views import SentenceView, sentence_view


@dataclass
class Translation:
    """One input line translated, with the ids on both sides (what its attention is computed for)."""

    source: str  # the line, stripped ("" for an empty line)
    text: str  # the translation, one line in the run's target language
    src_ids: list[int]  # as the model read them (truncated, ending in EOS); [] for an empty line
    output_ids: list[int]  # as the search produced them (EOS included when it ended)


@dataclass
class Translator:
    """A model, its tokenizer, the run's settings (with the caller's), a device, and the search that translates."""

    model: Seq2SeqTransformer
    tokenizer: TranslationTokenizer
    device: torch.device
    backend: SearchBackend = field(repr=False)
    settings: RunSettings = RunSettings()
    files: RunFiles | None = None  # where the weights were read from (an export is made from them)
    truncated: int = 0  # sources cut to the length limit so far

    @classmethod
    def load(cls, run: str | Path, device: str = "auto", engine: str = "ours", compute_type: str = "default",
             overrides: dict | None = None) -> "Translator":
        """A run folder (its final, else best, else last checkpoint), one of its ``.ckpt`` files, or (for
        ``engine="ctranslate2"``) a folder exported from one; searched by ``engine`` (``ENGINES``). The
        checkpoint is read once. ``overrides``: settings instead of the run's own (``overridden``)."""
        check_engine(engine)
        run, exported = Path(run), None
        if engine == "ctranslate2":
            from model.inference.export import exported_checkpoint, is_exported_folder

            if is_exported_folder(run):  # the weights for the attention and the tokenizer: its checkpoint's run
                exported, run = run, exported_checkpoint(run)
        files, state = open_run(run)
        settings = overridden(files.settings, overrides or {})
        tokenizer = run_tokenizer(files, state)
        model = run_model(files, state)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        target = torch.device(device)
        model = model.to(target).eval()
        if engine == "ours":
            backend = OurSearch(model, tokenizer.bos_id, tokenizer.eos_id)
        elif engine == "ctranslate2":
            backend = CTranslate2Search.of_run(model, tokenizer, files, exported, target, compute_type)
        else:  # transformers: generate() on <run>/transformers
            backend = TransformersSearch.of_run(model, tokenizer, files, settings, None, target)
        return cls(model, tokenizer, target, backend, settings, files)

    @property
    def max_source_tokens(self) -> int:
        """The run's ``data.max_sentence_len`` (what it was trained on), never above the model's positions."""
        return self.settings.source_limit(self.model.max_len)

    @property
    def max_source_chars(self) -> int:
        """Characters kept of a line before tokenizing: far more than fit the model, bounded memory."""
        return 16 * self.max_source_tokens

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Source ids, truncated to the length limit (EOS kept); counted in ``self.truncated``. Lone surrogates
        and control characters are cleaned first (``data.lines.clean_text``)."""
        ids = self._source_ids(texts)
        self.truncated += sum(len(seq) > self.max_source_tokens for seq in ids)
        return [truncate_source(seq, self.max_source_tokens) for seq in ids]

    def source_tokens(self, lines: list[str]) -> list[int]:
        """How many source tokens the model would read of each line (0 for an empty line): what its search costs."""
        counts = [len(ids) for ids in self._source_ids([line.strip() for line in lines])]
        return [min(n, self.max_source_tokens) if line.strip() else 0 for n, line in zip(counts, lines)]

    def _source_ids(self, texts: list[str]) -> list[list[int]]:
        """The tokenizer's ids of each text, cut to ``max_source_chars`` and cleaned, before truncation."""
        return self.tokenizer.encode_src([clean_text(text[: self.max_source_chars]) for text in texts])

    def text(self, output_ids: list[list[int]], sources: list[str]) -> list[str]:
        """Target-language text of output ids, one line each (byte-level BPE can spell a line break); copy slots
        filled from the ``sources`` they were translated from."""
        return [" ".join(text.splitlines()) for text in self.tokenizer.decode_tgt(output_ids, sources)]

    @torch.no_grad()
    def translate(self, lines: list[str], config: SearchConfig | None = None, batch_size: int = 64,
                  keep_rows: KeepRows | None = None) -> list[Translation]:
        """Translate lines with ``config`` (default: the run's search): empty ones stay empty, the
        rest go in batches of similar length (answers in input order). ``keep_rows``: which lines to keep
        translating, asked at every step of our search (``model.search.KeepRows``)."""
        config = config or self.settings.search
        results = [Translation("", "", [], []) for _ in lines]
        todo = [i for i, line in enumerate(lines) if line.strip()]
        ids = self.encode([lines[i].strip() for i in todo])
        order = sorted(range(len(todo)), key=lambda j: len(ids[j]))  # similar lengths batch together
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            outputs = self.backend.search([ids[j] for j in batch], config, rows_of(keep_rows, [todo[j] for j in batch]))
            texts = self.text(outputs, [lines[todo[j]].strip() for j in batch])
            for j, output_ids, text in zip(batch, outputs, texts):
                results[todo[j]] = Translation(lines[todo[j]].strip(), text, ids[j], output_ids)
        return results

    @torch.no_grad()
    def n_best(self, translation: Translation, config: SearchConfig | None = None) -> list[tuple[str, float]]:
        """Every hypothesis the beam ended with for one translation, best first (the translation itself),
        with its score (ours: the length-normalized log-probability)."""
        hypotheses = self.backend.hypotheses(translation.src_ids, config or self.settings.search)
        texts = self.text([ids for ids, _ in hypotheses], [translation.source] * len(hypotheses))
        return list(zip(texts, [score for _, score in hypotheses]))

    def sentence_view(self, translation: Translation) -> SentenceView:
        """Every attention weight of one translation, for exactly the ids its search produced (by either engine)."""
        attention = sentence_attention(self.model, translation.src_ids, translation.output_ids, self.tokenizer.bos_id)
        return sentence_view(attention, self.tokenizer.src_tokens, self.tokenizer.tgt_tokens, translation.source,
                             translation.text, self.settings.pair.names)


def rows_of(keep_rows: KeepRows | None, rows: list[int]) -> KeepRows | None:
    """``keep_rows`` asked for these lines only, in this order (None stays None)."""
    if keep_rows is None:
        return None

    def asked() -> list[bool]:
        flags = keep_rows()
        return [flags[row] for row in rows]

    return asked


def run_tokenizer(files: RunFiles, state: dict) -> TranslationTokenizer:
    """The run's tokenizer, refused unless it is the one the checkpoint was trained with."""
    try:
        tokenizer = TranslationTokenizer.load(files.folder)
    except Exception as error:  # noqa: BLE001 — tokenizers raises plain Exceptions on a corrupt file
        raise RunLoadError(f"{files.folder / JOINT_FILE}: unusable tokenizer "
                           f"({str(error).splitlines()[0][:120]})") from None
    config = model_config(state, files.checkpoint)
    expected = state["hyper_parameters"].get("tokenizer_sha256")
    sizes, trained = (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size), (config.get("src_vocab_size"),
                                                                              config.get("tgt_vocab_size"))
    if sizes != trained or (expected and expected != tokenizer_fingerprint(files.folder)):
        raise RunLoadError(f"{files.folder / JOINT_FILE}: tokenizer does not match checkpoint {files.checkpoint} "
                           f"(vocabulary {sizes} vs {trained})")
    return tokenizer


def run_model(files: RunFiles, state: dict) -> Seq2SeqTransformer:
    """The checkpoint's model, its weights loaded (on the CPU)."""
    try:
        model = Seq2SeqTransformer(**model_config(state, files.checkpoint))
        model.load_state_dict({k.removeprefix("model."): v for k, v in state["state_dict"].items()})
    except (TypeError, ValueError, RuntimeError) as error:
        raise RunLoadError(f"{files.checkpoint}: its weights do not fit its model_config "
                           f"({str(error).splitlines()[0][:160]})") from None
    return model


def overridden(settings: RunSettings, overrides: dict) -> RunSettings:
    """The run's settings with a caller's: ``max_sentence_len`` or any ``SearchConfig`` field (checked here, once)."""
    overrides = dict(overrides)
    max_sentence_len = overrides.pop("max_sentence_len", settings.max_sentence_len)
    return replace(settings, search=replace(settings.search, **overrides), max_sentence_len=max_sentence_len)
