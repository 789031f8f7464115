"""model/layers.py and model/embeddings.py against torch.nn's reference layers."""

import pytest
import torch
import torch.nn as nn

from model.embeddings import Embeddings, sinusoidal_table
from model.layers import DecoderLayer, EncoderLayer


def copy_into_reference(ours, ref):
    """Copy our weights into an nn.Transformer*Layer; its attention biases are zeroed (ours have none)."""
    pairs = [(ours.feed_forward.net[0], ref.linear1), (ours.feed_forward.net[3], ref.linear2)]
    norms = [b.norm for b in (ours.attn_block, ours.ff_block)] if hasattr(ours, "attn_block") else [
        b.norm for b in (ours.self_block, ours.cross_block, ours.ff_block)
    ]
    ref_norms = [getattr(ref, f"norm{i}") for i in range(1, len(norms) + 1)]
    pairs += list(zip(norms, ref_norms))
    attns = [(ours.self_attn, ref.self_attn)]
    if hasattr(ref, "multihead_attn"):
        attns.append((ours.cross_attn, ref.multihead_attn))
    with torch.no_grad():
        for a, b in pairs:
            b.weight.copy_(a.weight)
            b.bias.copy_(a.bias)
        for a, b in attns:
            b.in_proj_weight.copy_(a.in_proj_weight)
            b.out_proj.weight.copy_(a.out_proj.weight)
            b.in_proj_bias.zero_()
            b.out_proj.bias.zero_()


def layer_pair(ours_class, reference_class, norm_first: bool):
    """Our layer and torch.nn's (16 wide, 4 heads, feed-forward 32), with the same weights."""
    torch.manual_seed(0)
    ours = ours_class(16, 4, 32, dropout=0.0, norm_first=norm_first).eval()
    ref = reference_class(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    copy_into_reference(ours, ref)
    return ours, ref


@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_layer_matches_torch_nn(norm_first):
    ours, ref = layer_pair(EncoderLayer, nn.TransformerEncoderLayer, norm_first)
    x = torch.randn(2, 5, 16)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    out, _ = ours(x, padding)
    expected = ref(x, src_key_padding_mask=padding)
    # nn's inference fast path writes zeros at padded positions; compare the real ones.
    assert (out[~padding] - expected[~padding]).abs().max() <= 1e-5


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_layer_matches_torch_nn(norm_first):
    ours, ref = layer_pair(DecoderLayer, nn.TransformerDecoderLayer, norm_first)
    y, memory = torch.randn(2, 6, 16), torch.randn(2, 5, 16)
    memory_padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    out, _, _ = ours(y, memory, memory_padding)
    expected = ref(y, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(6), tgt_is_causal=True,
                   memory_key_padding_mask=memory_padding)
    assert (out - expected).abs().max() <= 1e-5


def test_sinusoidal_table_follows_the_formula():
    table = sinusoidal_table(50, 8)
    pos, i = 7, 2
    assert table[pos, 2 * i].item() == pytest.approx(torch.sin(torch.tensor(pos / 10000 ** (2 * i / 8))).item(), abs=1e-6)
    assert table[pos, 2 * i + 1].item() == pytest.approx(torch.cos(torch.tensor(pos / 10000 ** (2 * i / 8))).item(), abs=1e-6)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_embeddings_scale_offset_and_limits(positional):
    emb = Embeddings(11, 8, pad_id=0, max_len=6, positional=positional, dropout=0.0)
    tokens = torch.tensor([[3, 4, 5]])
    full = emb(tokens)
    assert full.shape == (1, 3, 8)
    # Decoding step by step with offsets gives the same vectors as the whole sequence.
    torch.testing.assert_close(emb(tokens[:, 2:], offset=2), full[:, 2:])
    torch.testing.assert_close(full[0, 0] - emb.position(1)[0], emb.token.weight[3] * 8**0.5)
    with pytest.raises(ValueError, match="max_len"):
        emb(torch.ones(1, 7, dtype=torch.long))


def test_three_dropouts_each_where_it_belongs():
    from model.transformer import Seq2SeqTransformer, shape_problems

    model = Seq2SeqTransformer(20, 20, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32,
                               dropout=0.3, attention_dropout=0.1, activation_dropout=0.2)
    for layer in (model.encoder_layers[0], model.decoder_layers[0]):
        assert layer.self_attn.dropout == 0.1 and layer.feed_forward.net[2].p == 0.2  # weights; after the ReLU
        assert layer.ff_block.dropout.p == 0.3  # each sublayer's output
    assert model.decoder_layers[0].cross_attn.dropout == 0.1 and model.src_embed.dropout.p == 0.3
    same = EncoderLayer(16, 2, 32, dropout=0.25)  # not given: as dropout (runs saved before the split)
    assert same.self_attn.dropout == same.feed_forward.net[2].p == 0.25
    assert shape_problems({"attention_dropout": 1.5}) == ["attention_dropout=1.5 must be in [0, 1), or null"]
    assert shape_problems({"dropout": None}) == ["dropout=None must be in [0, 1)"]
