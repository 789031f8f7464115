"""model/attention.py against the article's printed tensors, torch.nn and float64 math."""

import pytest
import torch
import torch.nn as nn

from helpers import head_weights
from model.attention import Attention, MultiHeadAttention, attend, blocked_positions, causal_mask

# The article's encodings for "draw a map" and the tensors it prints.
C = torch.tensor([[1.16, 0.23], [0.57, 1.36], [4.41, -2.16]])
SELF_ATTENTION = torch.tensor([[1.0100, 1.0641], [0.2040, 0.7057], [3.4989, 2.2427]])
MASKED_SELF_ATTENTION = torch.tensor([[0.6038, 0.7434], [-0.0062, 0.6072], [3.4989, 2.2427]])
TWO_HEADS = torch.tensor(
    [[1.0100, 1.0641, -0.7081, -0.8268], [0.2040, 0.7057, -0.7417, -0.9193], [3.4989, 2.2427, -0.7190, -0.8447]]
)
WQ = [[0.5406, 0.5869], [-0.1657, 0.6496]]
WK = [[-0.1549, 0.1427], [-0.3443, 0.4153]]
WV = [[0.6233, -0.5188], [0.6146, 0.1323]]


def test_seeded_attention_reproduces_article():
    torch.manual_seed(42)
    attn = Attention(2)
    torch.testing.assert_close(attn(C, C, C)[0], SELF_ATTENTION, atol=1e-4, rtol=0)
    torch.testing.assert_close(attn(C, C, C, causal=True)[0], MASKED_SELF_ATTENTION, atol=1e-4, rtol=0)
    torch.testing.assert_close(attn.WQ.weight, torch.tensor(WQ), atol=1e-4, rtol=0)


def test_printed_weights_loaded_by_hand_reproduce_article():
    attn = Attention(2)
    with torch.no_grad():
        for layer, w in ((attn.WQ, WQ), (attn.WK, WK), (attn.WV, WV)):
            layer.weight.copy_(torch.tensor(w))
    # The printed weights are rounded to 4 decimals (±5e-5 each); through encodings as
    # large as 4.41 that moves the outputs by up to ~2.2e-4, so 1e-4 cannot hold here.
    torch.testing.assert_close(attn(C, C, C)[0], SELF_ATTENTION, atol=3e-4, rtol=0)
    torch.testing.assert_close(attn(C, C, C, causal=True)[0], MASKED_SELF_ATTENTION, atol=3e-4, rtol=0)


@pytest.mark.parametrize("fused", [True, False])
def test_seeded_two_heads_concat_reproduces_article(fused):
    torch.manual_seed(42)
    mha = MultiHeadAttention(2, num_heads=2, d_head=2, out_proj=False)
    mha.fused = fused
    torch.testing.assert_close(mha(C, C, C)[0], TWO_HEADS, atol=1e-4, rtol=0)
    # The first head is the single-head article example, its weights packed in place.
    wq, wk, wv = head_weights(mha, 0)
    torch.testing.assert_close(wq, torch.tensor(WQ), atol=1e-4, rtol=0)
    torch.testing.assert_close(wv, torch.tensor(WV), atol=1e-4, rtol=0)


def test_causal_mask_is_the_articles_tril():
    assert torch.equal(causal_mask(3, 3), torch.tril(torch.ones(3, 3)) == 0)
    # With two cached steps, the one new query (position 2) sees all three keys.
    assert not causal_mask(1, 3).any()


def reference_pair(d_model=16, heads=4, bias=False):
    ours = MultiHeadAttention(d_model, heads, bias=bias)
    ref = nn.MultiheadAttention(d_model, heads, bias=bias, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.in_proj_weight)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        if bias:
            ours.in_proj_bias.normal_()
            ours.out_proj.bias.normal_()
            ref.in_proj_bias.copy_(ours.in_proj_bias)
            ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ours.eval(), ref.eval()


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", ["self", "causal", "cross", "padding", "causal+padding"])
def test_multi_head_matches_torch_nn(case, bias):
    torch.manual_seed(0)
    ours, ref = reference_pair(bias=bias)
    x, memory = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    key_padding = None
    if "padding" in case:
        key_padding = torch.zeros(3, 5 if case.startswith("causal") else 7, dtype=torch.bool)
        key_padding[1, -2:] = True
        key_padding[2, -1:] = True
    k = memory if case in ("cross", "padding") else x
    causal = case.startswith("causal")
    attn_mask = causal_mask(5, 5) if causal else None
    expected, expected_w = ref(x, k, k, key_padding_mask=key_padding, attn_mask=attn_mask, average_attn_weights=False)
    for need_weights in (False, True):
        got, weights = ours(x, k, k, causal=causal, key_padding_mask=key_padding, need_weights=need_weights)
        assert (weights is None) == (not need_weights)  # one return type: (output, weights or None)
        assert (got - expected).abs().max() <= 1e-5
        if need_weights:
            assert (weights - expected_w).abs().max() <= 1e-5


def test_explicit_and_fused_paths_agree_and_weights_are_distributions():
    torch.manual_seed(1)
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 6, 32)
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    for causal in (False, True):
        fused, _ = mha(x, x, x, causal=causal, key_padding_mask=padding)
        explicit, weights = mha(x, x, x, causal=causal, key_padding_mask=padding, need_weights=True)
        torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 6))
        blocked = blocked_positions(6, 6, causal, padding).expand_as(weights)
        assert torch.all(weights[blocked] == 0)


def test_training_runs_the_kernels_it_needs_and_no_more(monkeypatch):
    # Training on the fused path: the square causal mask is the kernel's own (no mask tensor built), and
    # rows are never checked for every key blocked (a training sentence always has a token). Same output.
    import model.attention as attention

    torch.manual_seed(1)
    mha = MultiHeadAttention(32, 4).train()  # dropout 0: training and evaluation compute the same
    x = torch.randn(2, 6, 32)
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    expected = [mha(x, x, x, causal=True, need_weights=True)[0], mha(x, x, x, key_padding_mask=padding,
                                                                       need_weights=True)[0]]
    monkeypatch.setattr(attention, "causal_mask", lambda *args: pytest.fail("a causal mask built for the kernel"))
    real_fill = torch.Tensor.masked_fill
    monkeypatch.setattr(torch.Tensor, "masked_fill", lambda *a: pytest.fail("empty rows checked in training"))
    got = [mha(x, x, x, causal=True)[0], mha(x, x, x, key_padding_mask=padding)[0]]
    monkeypatch.setattr(torch.Tensor, "masked_fill", real_fill)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_padded_query_row_gives_zeros_not_nan(need_weights):
    q, k, v = torch.randn(2, 1, 3, 4), torch.randn(2, 1, 5, 4), torch.randn(2, 1, 5, 4)
    padding = torch.tensor([[True] * 5, [False] * 5])
    out, _ = attend(q, k, v, blocked_positions(3, 5, False, padding), need_weights=need_weights)
    assert not torch.isnan(out).any()
    assert torch.all(out[0] == 0)
    assert torch.all(out[1] != 0)


def test_float64_recomputation_and_gradcheck():
    torch.manual_seed(2)
    mha = MultiHeadAttention(6, num_heads=2, bias=True).double()
    x = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    padding = torch.tensor([[False, False, False, True], [False] * 4])
    # Recompute by hand, head by head, from the per-head weights: softmax(QKᵀ/√d + M)V.
    heads = []
    for h in range(2):
        wq, wk, wv = head_weights(mha, h)
        bq, bk, bv = (mha.in_proj_bias[i * 6 + h * 3 : i * 6 + h * 3 + 3] for i in range(3))
        scores = (x @ wq.T + bq) @ (x @ wk.T + bk).transpose(1, 2) / 3**0.5
        scores = scores.masked_fill(padding[:, None, :], float("-inf"))
        heads.append(scores.softmax(-1) @ (x @ wv.T + bv))
    expected = mha.out_proj(torch.cat(heads, dim=-1))
    torch.testing.assert_close(mha(x, x, x, key_padding_mask=padding)[0], expected, atol=1e-12, rtol=1e-12)
    for need_weights in (False, True):
        def run(inp):
            return mha(inp, inp, inp, causal=True, key_padding_mask=padding, need_weights=need_weights)[0]
        assert torch.autograd.gradcheck(run, (x,))


def test_heads_run_in_one_call_not_a_loop():
    # One packed projection parameter, not one Linear per head.
    mha = MultiHeadAttention(8, 4)
    assert [name for name, _ in mha.named_parameters()] == ["in_proj_weight", "out_proj.weight"]
    assert mha.in_proj_weight.shape == (24, 8)


@pytest.mark.parametrize("causal", [False, True])
def test_single_head_padding_and_causal_masks_equal_one_head_of_mha(causal):
    torch.manual_seed(5)
    head = Attention(8)
    mha = MultiHeadAttention(8, num_heads=1, d_head=8, out_proj=False)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([head.WQ.weight, head.WK.weight, head.WV.weight]))
    x = torch.randn(2, 5, 8)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    out, weights = head(x, x, x, causal=causal, key_padding_mask=padding)
    expected, expected_weights = mha(x, x, x, causal=causal, key_padding_mask=padding, need_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_weights[:, 0])  # (B, Lq, Lk): the one head
    assert torch.all(weights[1, :, 3:] == 0)  # padded keys get no weight
