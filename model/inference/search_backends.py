"""The searches a ``Translator`` can run on the same weights: ours (``model/search.py``), CTranslate2's or
``transformers``' ``generate()``. Each takes a batch of source ids and returns what ``model/search.py`` does, or one
sentence's whole beam; everything around the search (lines, tokens, batches, text, attention) is the ``Translator``'s.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

import torch

from data.sampler import pad_batch
from model.inference.onednn import fast_linear
from model.inference.run_folder import RunFiles, RunSettings
from model.search import Attending, KeepRows, SearchConfig, beam_hypotheses, search
from model.search_outputs import Output, produced_ids
from model.transformer import Seq2SeqTransformer

# The engines, each with the package it needs beyond ours (and where to get it).
ENGINES = {"ours": None, "ctranslate2": ("ctranslate2", 'pip install -e ".[export]"'),
           "transformers": ("transformers", 'pip install -e ".[hub]"')}


def check_engine(engine: str) -> None:
    """Refuse an engine that is not in ``ENGINES``, or whose package is missing, before anything loads."""
    if engine not in ENGINES:
        raise ValueError(f"engine={engine}: one of {', '.join(ENGINES)}")
    if ENGINES[engine] and importlib.util.find_spec(ENGINES[engine][0]) is None:
        raise ValueError(f"engine={engine} needs {ENGINES[engine][0]}: {ENGINES[engine][1]}")


def output_limit(source: list[int], config: SearchConfig, max_len: int) -> int:
    """As ``model.search.output_limits``: a · source length + b, within the model's positions."""
    return max(1, min(int(config.max_len_a * len(source) + config.max_len_b), max_len - 1))


@dataclass
class OurSearch:
    """``model/search.py`` on the run's model; bf16 autocast on a GPU, oneDNN's linear layers on an AMD CPU. The other
    engines answer ``search`` and ``hypotheses`` alike, as far as they can."""

    model: Seq2SeqTransformer
    bos_id: int
    eos_id: int

    def _batch(self, sources: list[list[int]]) -> torch.Tensor:
        return pad_batch(sources, self.model.pad_id).to(next(self.model.parameters()).device)  # (B, S)

    def _speed_up(self, device: torch.device):
        """bf16 autocast on a GPU; oneDNN's linear layers on an AMD x86 CPU (``onednn.py``)."""
        return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else fast_linear(device)

    def search(self, sources: list[list[int]], config: SearchConfig, keep_rows: KeepRows | None = None,
               scores: bool = True, attention: Attending = None) -> list[Output]:
        """An output per source (ids ending in EOS, no padding; with their log-probabilities as far as the engine
        gives them, unless ``scores=False``; with the cross-attention ``attention`` names, where the engine keeps
        it: ours); rows not kept (``keep_rows``) may end early."""
        src = self._batch(sources)
        with self._speed_up(src.device):
            return search(self.model, src, self.bos_id, self.eos_id, config, keep_rows, scores, attention)

    def hypotheses(self, source: list[int], config: SearchConfig) -> list[tuple[list[int], float]]:
        """Every hypothesis the beam ends with for one source, best first, with its score."""
        src = self._batch([source])
        with self._speed_up(src.device):
            beams = beam_hypotheses(self.model, src, self.bos_id, self.eos_id, config)
        return list(zip(produced_ids(beams.tokens[0], self.eos_id, self.model.pad_id), beams.scores[0].tolist()))


class CTranslate2Search:
    """CTranslate2's ``translate_batch`` on an exported folder (``model/inference/export.py``); it searches a
    batch to its end (``keep_rows`` is not asked), its length penalty length^alpha, not GNMT's. It gives no
    alternatives: its other hypotheses are finished ones, not the beam as ours leaves it, and their agreement would
    read on another scale than the run's calibration; its marks read the score alone."""

    def __init__(self, model: Seq2SeqTransformer, tokenizer, files: RunFiles, folder: Path | None,
                 device: torch.device, compute_type: str = "default", aligned: tuple[int, int] | None = None) -> None:
        """On ``folder``, default ``<run>/ctranslate2`` (exported first, with the ``aligned`` head, when missing or made
        from another checkpoint)."""
        import ctranslate2

        from model.inference.export import export_ctranslate2, up_to_date

        folder = folder or up_to_date(files.folder / "ctranslate2", files.checkpoint, "model.bin", "CTranslate2",
                                      lambda out: export_ctranslate2(model, tokenizer, files.checkpoint, out,
                                                                     pair=files.settings.pair, aligned=aligned))
        self.pieces = [tokenizer.src.id_to_token(i) for i in range(tokenizer.src_vocab_size)]
        self.ids = {piece: i for i, piece in enumerate(self.pieces)}
        self.eos_id, self.max_len = tokenizer.eos_id, model.max_len
        self.engine = ctranslate2.Translator(str(folder), device=device.type, compute_type=compute_type)

    def _translate(self, sources: list[list[int]], config: SearchConfig, limit: int, whole_beam: bool = False):
        return self.engine.translate_batch(
            [[self.pieces[i] for i in source] for source in sources], beam_size=config.beam_size,
            length_penalty=config.length_penalty, max_decoding_length=limit,
            num_hypotheses=config.beam_size if whole_beam else 1, return_scores=True)

    def _ids(self, pieces: list[str], limit: int) -> list[int]:
        ids = [self.ids[piece] for piece in pieces]
        return ids + [self.eos_id] if len(ids) < limit else ids  # it ended: CTranslate2 drops the EOS

    def search(self, sources: list[list[int]], config: SearchConfig, keep_rows: KeepRows | None = None,
               scores: bool = True, attention: Attending = None) -> list[Output]:
        outputs: list[Output] = []
        # One call per output limit; a length-sorted batch has few (the limit grows with the length).
        for limit, group in groupby(sources, key=lambda source: output_limit(source, config, self.max_len)):
            for answer in self._translate(list(group), config, limit):
                ids = self._ids(answer.hypotheses[0], limit)
                # Its score is the log-probability over length^alpha (the EOS counted): the sum given back.
                total = answer.scores[0] * len(ids) ** config.length_penalty if scores else None
                outputs.append(Output(ids, None, total))
        return outputs

    def hypotheses(self, source: list[int], config: SearchConfig) -> list[tuple[list[int], float]]:
        limit = output_limit(source, config, self.max_len)
        answer = self._translate([source], config, limit, whole_beam=True)[0]
        return [(self._ids(pieces, limit), score) for pieces, score in zip(answer.hypotheses, answer.scores)]


class TransformersSearch:
    """``generate()`` of ``transformers`` on an exported Pegasus folder (``export_transformers.py``); it searches
    a batch to its end (``keep_rows`` is not asked). Its length penalty, like CTranslate2's, divides by
    length^alpha; its output limit is per batch, so a batch is searched in parts of one limit."""

    def __init__(self, model: Seq2SeqTransformer, tokenizer, files: RunFiles, settings: RunSettings,
                 device: torch.device) -> None:
        """On ``<run>/transformers``, exported first when missing or made from another checkpoint."""
        from transformers import AutoModelForSeq2SeqLM

        from model.inference.export import up_to_date
        from model.inference.export_transformers import export_transformers

        folder = up_to_date(files.folder / "transformers", files.checkpoint, "model.safetensors", "transformers",
                            lambda out: export_transformers(model, tokenizer, settings, files.checkpoint, out))
        self.pad_id, self.eos_id, self.max_len, self.device = model.pad_id, tokenizer.eos_id, model.max_len, device
        self.model = AutoModelForSeq2SeqLM.from_pretrained(folder).to(device).eval()

    def _generate(self, sources: list[list[int]], config: SearchConfig, limit: int, whole_beam: bool = False):
        src = pad_batch(sources, self.pad_id).to(self.device)  # (B, S); max_length counts the start token
        beam = {"length_penalty": config.length_penalty, "early_stopping": True} if config.beam_size > 1 else {}
        return self.model.generate(input_ids=src, attention_mask=src != self.pad_id, num_beams=config.beam_size,
                                   max_length=limit + 1, do_sample=False, output_scores=whole_beam,
                                   num_return_sequences=config.beam_size if whole_beam else 1,
                                   return_dict_in_generate=True, **beam)

    def search(self, sources: list[list[int]], config: SearchConfig, keep_rows: KeepRows | None = None,
               scores: bool = True, attention: Attending = None) -> list[Output]:
        outputs: list[Output] = []  # without scores: generate() gives them only for the whole beam
        for limit, group in groupby(sources, key=lambda source: output_limit(source, config, self.max_len)):
            generated = self._generate(list(group), config, limit).sequences[:, 1:]  # without the start token
            outputs += [Output(ids) for ids in produced_ids(generated, self.eos_id, self.pad_id)]
        return outputs

    def hypotheses(self, source: list[int], config: SearchConfig) -> list[tuple[list[int], float]]:
        generated = self._generate([source], config, output_limit(source, config, self.max_len), whole_beam=True)
        scores = generated.sequences_scores.tolist() if config.beam_size > 1 else [0.0]
        return list(zip(produced_ids(generated.sequences[:, 1:], self.eos_id, self.pad_id), scores))
