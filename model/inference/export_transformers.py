"""A trained run as a ``transformers`` folder: Pegasus weights, a tokenizer, a generation config and a model card.

What ``AutoModelForSeq2SeqLM.from_pretrained(folder)`` and ``AutoTokenizer.from_pretrained(folder)`` load
without this project (``pip install -e ".[hub]"``; ``scripts/export.py --to transformers`` is the command).
Our default model (pre-norm, sinusoidal positions, one shared vocabulary, tied output, ReLU) is what
``transformers`` calls Pegasus, up to one fixed reordering of the model axis: our sinusoid interleaves
sin and cos (sin at even dimensions), Pegasus puts every sin first and every cos second. Reordering
every weight that reads or writes the residual stream the same way (embeddings, LayerNorms, the input
columns of Q/K/V and of the first feed-forward layer, the output rows of W_O and of the second) gives
the same function: LayerNorm, the residual sums and every projection in between do not care in which
order the model axis is laid out. Our attention has no biases: theirs are zeros.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from data.tokenizer import BOS, EOS, PAD, UNK, TranslationTokenizer
from model.inference.export import EXPORT_FILE, exportable
from model.inference.model_card import model_card
from model.inference.run_folder import RunSettings
from model.transformer import Seq2SeqTransformer


def pegasus_order(d_model: int) -> torch.Tensor:
    """Our model axis in Pegasus' order: the sin dimensions (ours: even) first, then the cos ones (odd)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def pegasus_weights(model: Seq2SeqTransformer) -> dict[str, torch.Tensor]:
    """Our weights under Pegasus' names, the model axis reordered (``pegasus_order``)."""
    order = pegasus_order(model.src_embed.token.weight.size(1))
    rows, columns = (lambda w: w[order]), (lambda w: w[:, order])  # model axis as output / as input
    weights = {"model.shared.weight": columns(model.src_embed.token.weight)}

    def norm(name: str, layer_norm: torch.nn.LayerNorm) -> None:
        weights[f"{name}.weight"], weights[f"{name}.bias"] = rows(layer_norm.weight), rows(layer_norm.bias)

    def attention(name: str, ours) -> None:
        q, k, v = ours.in_proj_weight.chunk(3)  # [W_Q; W_K; W_V] (3·inner, d_model), no biases
        for part, weight in (("q_proj", q), ("k_proj", k), ("v_proj", v)):
            weights[f"{name}.{part}.weight"], weights[f"{name}.{part}.bias"] = columns(weight), torch.zeros(len(weight))
        weights[f"{name}.out_proj.weight"] = rows(ours.out_proj.weight)
        weights[f"{name}.out_proj.bias"] = torch.zeros(ours.out_proj.weight.size(0))

    def feed_forward(name: str, ours) -> None:
        first, second = ours.feed_forward.net[0], ours.feed_forward.net[3]
        weights[f"{name}.fc1.weight"], weights[f"{name}.fc1.bias"] = columns(first.weight), first.bias
        weights[f"{name}.fc2.weight"], weights[f"{name}.fc2.bias"] = rows(second.weight), rows(second.bias)

    for i, layer in enumerate(model.encoder_layers):
        name = f"model.encoder.layers.{i}"
        attention(f"{name}.self_attn", layer.self_attn)
        norm(f"{name}.self_attn_layer_norm", layer.attn_block.norm)
        feed_forward(name, layer)
        norm(f"{name}.final_layer_norm", layer.ff_block.norm)
    for i, layer in enumerate(model.decoder_layers):
        name = f"model.decoder.layers.{i}"
        attention(f"{name}.self_attn", layer.self_attn)
        norm(f"{name}.self_attn_layer_norm", layer.self_block.norm)
        attention(f"{name}.encoder_attn", layer.cross_attn)
        norm(f"{name}.encoder_attn_layer_norm", layer.cross_block.norm)
        feed_forward(name, layer)
        norm(f"{name}.final_layer_norm", layer.ff_block.norm)
    norm("model.encoder.layer_norm", model.encoder_norm)
    norm("model.decoder.layer_norm", model.decoder_norm)
    return {name: weight.detach().float().cpu().contiguous() for name, weight in weights.items()}


def pegasus_config(model: Seq2SeqTransformer, settings: RunSettings):
    """``PegasusConfig`` of our shape and special ids; the run's search as its generation defaults."""
    from transformers import GenerationConfig, PegasusConfig

    layer = model.encoder_layers[0]
    config = PegasusConfig(
        vocab_size=model.src_vocab_size, d_model=model.src_embed.token.weight.size(1),
        encoder_layers=len(model.encoder_layers), decoder_layers=len(model.decoder_layers),
        encoder_attention_heads=layer.self_attn.num_heads, decoder_attention_heads=layer.self_attn.num_heads,
        encoder_ffn_dim=layer.feed_forward.net[0].out_features, decoder_ffn_dim=layer.feed_forward.net[0].out_features,
        activation_function="relu", max_position_embeddings=model.max_len, scale_embedding=True,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, tie_word_embeddings=True,
        pad_token_id=model.pad_id, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
        forced_eos_token_id=None)
    search = settings.search
    beam = {"length_penalty": search.length_penalty, "early_stopping": True} if search.beam_size > 1 else {}
    generation = GenerationConfig(num_beams=search.beam_size, max_length=model.max_len, decoder_start_token_id=1,
                                  bos_token_id=1, eos_token_id=2, pad_token_id=model.pad_id, forced_eos_token_id=None,
                                  **beam)
    return config, generation


def hub_tokenizer(tokenizer: TranslationTokenizer, max_source_tokens: int):
    """Our joint tokenizer as ``transformers`` loads it: ``<eos>`` appended to every source, a source cut to
    ``max_source_tokens`` (its ``<eos>`` kept, as ours does), spaces decoded exactly as they were encoded."""
    from tokenizers import Tokenizer, normalizers, processors
    from transformers import PreTrainedTokenizerFast

    inner = Tokenizer.from_str(tokenizer.src.to_str())
    if tokenizer.spaced:  # every line read with a leading space, as ours reads it (its decoder drops it)
        inner.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Prepend(" ")])
    inner.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", special_tokens=[(EOS, tokenizer.eos_id)])
    inner.enable_truncation(max_length=max_source_tokens)
    return PreTrainedTokenizerFast(tokenizer_object=inner, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   unk_token=UNK, model_max_length=max_source_tokens,
                                   clean_up_tokenization_spaces=False)


def export_transformers(model: Seq2SeqTransformer, tokenizer: TranslationTokenizer, settings: RunSettings,
                        checkpoint: Path, folder: Path) -> Path:
    """Write a loaded run (read from ``checkpoint``) as a ``transformers`` Pegasus folder with its model card
    (``model_card.py``); returns it."""
    exportable(model, "transformers")
    from transformers import PegasusForConditionalGeneration

    config, generation = pegasus_config(model, settings)
    hub_model = PegasusForConditionalGeneration(config).eval()
    missing, unexpected = hub_model.load_state_dict(pegasus_weights(model), strict=False)
    # Tied to model.shared, computed (the sinusoids) or zero (the logits' bias): not ours to give.
    theirs = {"lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
              "model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight", "final_logits_bias"}
    if unexpected or set(missing) - theirs:
        raise RuntimeError(f"Pegasus weights do not match: missing {missing}, unexpected {unexpected}")
    hub_model.tie_weights()
    hub_model.generation_config = generation
    folder.mkdir(parents=True, exist_ok=True)
    hub_model.save_pretrained(folder)
    hub_tokenizer(tokenizer, settings.source_limit(model.max_len)).save_pretrained(folder)
    if tokenizer.truecaser:  # which first words a caller lowers (the model card says how)
        tokenizer.truecaser.save(folder)
    (folder / "README.md").write_text(model_card(model, settings, checkpoint, folder), encoding="utf-8")
    (folder / EXPORT_FILE).write_text(json.dumps({"checkpoint": str(checkpoint)}), encoding="utf-8")
    return folder

