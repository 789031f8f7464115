"""A trained run as a CTranslate2 model folder: the same weights for the engine translation systems
deploy on CPUs (``pip install -e ".[export]"``; ``scripts/export.py`` is the command).

The spec is built directly (``ctranslate2.specs.TransformerSpec``), not through another framework:
our packed QKV weights, no attention biases, our sinusoidal (or learned) position table supplied
explicitly (CTranslate2's own sinusoid lays sines and cosines out differently), embeddings scaled
by √d_model as ours, tied embeddings kept tied, and our vocabulary with its special tokens.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from data.languages import LanguagePair
from data.tokenizer import BOS, EOS, UNK, TranslationTokenizer
from model.inference.run_folder import RunLoadError
from model.transformer import Seq2SeqTransformer

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16",
                 "int8_bfloat16")
EXPORT_FILE = "export.json"  # written beside either export: which checkpoint (CTranslate2's: its quantization, pair)


def exportable(model: Seq2SeqTransformer, target: str = "ctranslate2") -> None:
    """Refuse, before anything is written, what the ``target`` engine ("ctranslate2" or "transformers")
    cannot express: one list for both exporters."""
    problems = []
    if model.decoder_layers[0].cross_attn is None:
        problems.append("cross_attention=false (the decoder must read the source)")
    if model.src_embed.position is None:
        problems.append(f"positional=none ({'CTranslate2' if target == 'ctranslate2' else 'Pegasus'} always adds positions)")
    if not model.causal_decoder:
        problems.append("causal_decoder=false (the decoder is searched causally)")
    if model.src_vocab_size != model.tgt_vocab_size or model.src_embed.token.weight is not model.tgt_embed.token.weight:
        problems.append("separate source and target vocabularies (one shared vocabulary is exported)")
    if target == "transformers" and model.src_embed.position is not None and not hasattr(model.src_embed.position, "table"):
        problems.append("positional=learned (Pegasus' positions are sinusoidal)")
    if target == "transformers" and not isinstance(model.encoder_norm, torch.nn.LayerNorm):
        problems.append("norm_first=false (Pegasus is pre-norm)")
    if problems:
        name = "CTranslate2" if target == "ctranslate2" else "transformers"
        raise RunLoadError(f"cannot export to {name}: " + "; ".join(problems))


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy()


def _layer_norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _linear(spec, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
    spec.weight = _array(weight)
    if bias is not None:
        spec.bias = _array(bias)


def _positions(embeddings, max_len: int) -> np.ndarray:
    if hasattr(embeddings.position, "table"):  # sinusoidal: our layout, sin at even and cos at odd dimensions
        return _array(embeddings.position.table[:max_len])
    return _array(embeddings.position.embedding.weight[:max_len])  # learned


def head_first(weight: torch.Tensor, head: int, heads: int, dim: int = 0) -> torch.Tensor:
    """``weight`` with the rows (``dim`` 0) or columns (1) of ``head`` moved before the other heads' (the same
    attention: each head's output is summed by the output projection's columns, moved alike)."""
    chunks = weight.chunk(heads, dim)
    return torch.cat([chunks[head], *(chunks[h] for h in range(heads) if h != head)], dim)


def transformer_spec(model: Seq2SeqTransformer, aligned: tuple[int, int] | None = None):
    """The ``ctranslate2.specs.TransformerSpec`` holding this model's weights; ``aligned`` (decoder layer, head, from
    0): the head trained to align, first among its layer's heads and CTranslate2's alignment head, so that
    ``return_attention`` gives its weights (else the last layer's first head, CTranslate2's default)."""
    from ctranslate2.specs import TransformerSpec

    norm_first = isinstance(model.encoder_norm, torch.nn.LayerNorm)
    heads = model.encoder_layers[0].self_attn.num_heads
    spec = TransformerSpec.from_config((len(model.encoder_layers), len(model.decoder_layers)), heads, pre_norm=norm_first,
                                       alignment_layer=aligned[0] if aligned else -1, alignment_heads=1)
    spec.config.layer_norm_epsilon = model.encoder_layers[0].attn_block.norm.eps
    d_model = model.src_embed.token.weight.size(1)
    inner = heads * model.encoder_layers[0].self_attn.d_head
    for ours, theirs in ((model.src_embed, spec.encoder), (model.tgt_embed, spec.decoder)):
        embeddings = theirs.embeddings[0] if isinstance(theirs.embeddings, list) else theirs.embeddings
        embeddings.weight = _array(ours.token.weight)
        theirs.scale_embeddings = True  # × √d_model, as Embeddings does
        theirs.position_encodings.encodings = _positions(ours, model.max_len)
    if norm_first:
        _layer_norm(spec.encoder.layer_norm, model.encoder_norm)
        _layer_norm(spec.decoder.layer_norm, model.decoder_norm)
    for ours, theirs in zip(model.encoder_layers, spec.encoder.layer):
        _layer_norm(theirs.self_attention.layer_norm, ours.attn_block.norm)
        _linear(theirs.self_attention.linear[0], ours.self_attn.in_proj_weight, ours.self_attn.in_proj_bias)
        _linear(theirs.self_attention.linear[1], ours.self_attn.out_proj.weight, ours.self_attn.out_proj.bias)
        _feed_forward(theirs.ffn, ours)
    for layer, (ours, theirs) in enumerate(zip(model.decoder_layers, spec.decoder.layer)):
        _layer_norm(theirs.self_attention.layer_norm, ours.self_block.norm)
        _linear(theirs.self_attention.linear[0], ours.self_attn.in_proj_weight, ours.self_attn.in_proj_bias)
        _linear(theirs.self_attention.linear[1], ours.self_attn.out_proj.weight, ours.self_attn.out_proj.bias)
        cross = ours.cross_attn

        def first(weight: torch.Tensor, dim: int = 0, layer: int = layer) -> torch.Tensor:
            """The aligned head's query, key and value rows (or output columns) before the other heads'."""
            return head_first(weight, aligned[1], heads, dim) if aligned and aligned[0] == layer else weight

        q, k, v = (first(w) for w in cross.in_proj_weight.chunk(3))
        bias = None if cross.in_proj_bias is None else [first(b) for b in cross.in_proj_bias.chunk(3)]
        _layer_norm(theirs.attention.layer_norm, ours.cross_block.norm)
        _linear(theirs.attention.linear[0], q, None if bias is None else bias[0])
        _linear(theirs.attention.linear[1], torch.cat([k, v]), None if bias is None else torch.cat(bias[1:]))
        _linear(theirs.attention.linear[2], first(cross.out_proj.weight, 1), cross.out_proj.bias)
        _feed_forward(theirs.ffn, ours)
    _linear(spec.decoder.projection, model.output.weight)
    assert d_model == inner, "CTranslate2 needs heads · d_head == d_model"
    return spec


def _feed_forward(spec, layer) -> None:
    first, second = layer.feed_forward.net[0], layer.feed_forward.net[3]
    _layer_norm(spec.layer_norm, layer.ff_block.norm)
    _linear(spec.linear_0, first.weight, first.bias)
    _linear(spec.linear_1, second.weight, second.bias)


def export_ctranslate2(model: Seq2SeqTransformer, tokenizer: TranslationTokenizer, checkpoint: Path, folder: Path,
                       quantization: str = "float32", pair: LanguagePair = LanguagePair(),
                       aligned: tuple[int, int] | None = None) -> Path:
    """Write a loaded run's model (read from ``checkpoint``; translating ``pair``; its ``aligned`` head as
    CTranslate2's alignment head) as a CTranslate2 folder."""
    if quantization not in QUANTIZATIONS:
        raise RunLoadError(f"quantization={quantization!r}: one of {', '.join(QUANTIZATIONS)}")
    exportable(model)
    spec = transformer_spec(model, aligned)
    vocabulary = [tokenizer.src.id_to_token(i) for i in range(tokenizer.src_vocab_size)]
    spec.register_source_vocabulary(vocabulary)
    spec.register_target_vocabulary(vocabulary)
    spec.config.bos_token, spec.config.eos_token, spec.config.unk_token = BOS, EOS, UNK
    spec.config.decoder_start_token = BOS
    spec.validate()
    spec.optimize(quantization=quantization)
    folder.mkdir(parents=True, exist_ok=True)
    spec.save(str(folder))
    (folder / "README.md").write_text(
        f"# {pair.describe()}, a CTranslate2 export\n\nFrom `{checkpoint}` (quantization {quantization}), by "
        f"`scripts/export.py`. Tokens are this run's `tokenizer.json` pieces"
        + (" of each line read with a leading space, its first word lowered where the run's `truecase.json` lists it,"
           " the translation's first word capitalized again (`translate.py engine=ctranslate2` does all three)"
           if tokenizer.truecaser else "") + ".\n", encoding="utf-8")
    (folder / EXPORT_FILE).write_text(json.dumps({"checkpoint": str(checkpoint), "quantization": quantization,
                                                  "source_lang": pair.source, "target_lang": pair.target,
                                                  "aligned_head": aligned}),
                                      encoding="utf-8")
    return folder


def exported_checkpoint(folder: Path) -> Path | None:
    """The checkpoint a folder ``export_ctranslate2`` wrote was made from (its tokenizer and attention come from
    there); None for any other path."""
    if not ((folder / "model.bin").is_file() and (folder / EXPORT_FILE).is_file()):
        return None
    checkpoint = Path(json.loads((folder / EXPORT_FILE).read_text(encoding="utf-8"))["checkpoint"])
    if not checkpoint.is_file():
        raise RunLoadError(f"{folder / EXPORT_FILE}: the checkpoint it was made from, {checkpoint}, is gone")
    return checkpoint


def up_to_date(folder: Path, checkpoint: Path, weights: str, engine: str, export: Callable[[Path], object]) -> Path:
    """``folder`` as an export of ``checkpoint`` for ``engine``: ``export(folder)`` first, with one line saying so, if
    it (its ``weights`` file or its ``EXPORT_FILE``) is missing or was made from another (or an older) checkpoint."""
    record, weights = folder / EXPORT_FILE, folder / weights
    made_from = json.loads(record.read_text(encoding="utf-8")).get("checkpoint") if record.is_file() else None
    if made_from != str(checkpoint) or not weights.is_file() or weights.stat().st_mtime < checkpoint.stat().st_mtime:
        print(f"exporting {checkpoint} to {engine} in {folder}", file=sys.stderr)
        export(folder)
    return folder
