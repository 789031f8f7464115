"""Re-do the article's worked example ("draw a map") step by step, like its spreadsheet.

    python scripts/seed_walkthrough.py

Prints every matrix and checks each printed tensor of the article against ``model/attention.py``; exits
non-zero if any check fails.
"""

from __future__ import annotations

import sys

import torch

from model.attention import Attention, MultiHeadAttention, attention_weights, causal_mask

ENCODINGS = torch.tensor([[1.16, 0.23], [0.57, 1.36], [4.41, -2.16]])
ARTICLE = {
    "W_Q": [[0.5406, 0.5869], [-0.1657, 0.6496]],
    "W_K": [[-0.1549, 0.1427], [-0.3443, 0.4153]],
    "W_V": [[0.6233, -0.5188], [0.6146, 0.1323]],
    "first query number": [[0.7621]],
    "self-attention": [[1.0100, 1.0641], [0.2040, 0.7057], [3.4989, 2.2427]],
    "masked self-attention": [[0.6038, 0.7434], [-0.0062, 0.6072], [3.4989, 2.2427]],
    "softmax row 'draw' (36%, 40%, 24%)": [[0.357, 0.401, 0.242]],
    "'map' attends to itself (89.6%)": [[0.896]],
    "two heads, concatenated": [
        [1.0100, 1.0641, -0.7081, -0.8268],
        [0.2040, 0.7057, -0.7417, -0.9193],
        [3.4989, 2.2427, -0.7190, -0.8447],
    ],
}
TOKENS = ["draw", "a", "map"]


def show(title: str, matrix: torch.Tensor, rows: list[str] | None = None) -> None:
    print(f"\n{title}  {tuple(matrix.shape)}")
    for i, row in enumerate(matrix.tolist()):
        label = f"{rows[i]:>6} " if rows else "       "
        print(label + " ".join(f"{v:9.4f}" for v in row))


def check(name: str, ours: torch.Tensor, decimals: int) -> bool:
    expected = torch.tensor(ARTICLE[name])
    tolerance = 0.5 * 10**-decimals + 1e-6
    ok = ours.shape == expected.shape and bool(((ours - expected).abs() <= tolerance).all())
    print(f"  [{'match' if ok else 'MISMATCH'}] {name} (to {decimals} decimals, as printed)")
    return ok


def main() -> int:
    results = []
    torch.manual_seed(42)
    attn = Attention(2)
    x = ENCODINGS
    show("Encodings (word embedding + position), one row per token", x, TOKENS)
    # PyTorch stores W as (out, in): the article's matrices carry a transpose for the math.
    for name, layer in (("W_Q", attn.WQ), ("W_K", attn.WK), ("W_V", attn.WV)):
        show(f"{name} as PyTorch prints it (seed 42)", layer.weight.detach())
        results.append(check(name, layer.weight.detach(), 4))
    with torch.no_grad():
        Q, K, V = attn.WQ(x), attn.WK(x), attn.WV(x)
        show("Q = encodings × W_Qᵀ", Q, TOKENS)
        results.append(check("first query number", Q[:1, :1], 4))
        show("K = encodings × W_Kᵀ", K, TOKENS)
        show("V = encodings × W_Vᵀ", V, TOKENS)
        similarities = Q @ K.T
        show("Step 1: Q Kᵀ (dot products, query rows × key columns)", similarities, TOKENS)
        scaled = similarities / 2**0.5
        show("Step 2: scaled by √d_k = √2", scaled, TOKENS)
        weights = attention_weights(Q, K)
        show("Step 3: softmax of each row (rows sum to 1)", weights, TOKENS)
        results.append(check("softmax row 'draw' (36%, 40%, 24%)", weights[:1], 3))
        results.append(check("'map' attends to itself (89.6%)", weights[2:, 2:], 3))
        out = weights @ V
        show("Step 4: softmax × V = self-attention", out, TOKENS)
        results.append(check("self-attention", attn(x, x, x)[0], 4))

        mask = causal_mask(3, 3)
        show("Mask M (0 = look, -inf = blocked; the spreadsheet uses -1e23)",
             torch.zeros(3, 3).masked_fill(mask, float("-inf")), TOKENS)
        masked_weights = attention_weights(Q, K, mask)
        show("Masked softmax: the future gets exactly 0%", masked_weights, TOKENS)
        show("Masked softmax × V = masked self-attention", masked_weights @ V, TOKENS)
        results.append(check("masked self-attention", attn(x, x, x, causal=True)[0], 4))

        torch.manual_seed(42)
        heads = MultiHeadAttention(2, num_heads=2, d_head=2, out_proj=False)
        concatenated, _ = heads(x, x, x)
        show("Two heads, concatenated (head 1 = the seed-42 head above)", concatenated, TOKENS)
        results.append(check("two heads, concatenated", concatenated, 4))

    print(f"\n{sum(results)} of {len(results)} article tensors reproduced.")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
