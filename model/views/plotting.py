"""Attention heatmaps: one figure per attention type, layers x heads as a grid, tokens on the axes."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch import Tensor  # noqa: E402

from model.views import ATTENTION_TITLES, SentenceView  # noqa: E402


def attention_grid(
    layers: list[Tensor],
    query_tokens: list[str],
    key_tokens: list[str],
    title: str,
    heads: list[int] | None = None,
    first_layer: int = 1,
    languages: tuple[str, str] = ("", ""),
) -> Figure:
    """Rows = layers, columns = heads. Each map is (query_len, key_len) with rows summing to 1.

    ``layers``: per layer a (heads, Lq, Lk) tensor for ONE sentence, already cut to the
    real (non-padding) tokens. ``first_layer``: the number of the first layer given. ``languages``: what
    the queries and the keys are written in, for the axes' labels.
    """
    heads = heads if heads is not None else list(range(layers[0].size(0)))
    n_rows, n_cols = len(layers), len(heads)
    cell = 0.32  # inches per token, so that labels stay legible
    width = max(2.5, cell * len(key_tokens) + 1.2) * n_cols
    height = max(2.2, cell * len(query_tokens) + 1.2) * n_rows
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width, height), squeeze=False, dpi=80)
    for r, weights in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r][c]
            # Each row is a probability distribution: fixed 0..1 colour scale, never rescaled.
            ax.imshow(weights[head].float().cpu().numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=8)
            ax.set_yticks(range(len(query_tokens)), query_tokens, fontsize=8)
            ax.set_title(f"layer {r + first_layer} · head {head + 1}", fontsize=9)
            if c == 0:
                ax.set_ylabel(f"{languages[0]} queries (attending)".strip(), fontsize=8)
            if r == n_rows - 1:
                ax.set_xlabel(f"{languages[1]} keys (attended to)".strip(), fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def attention_figures(
    view: SentenceView,
    caption: str = "",
    kinds: tuple[str, ...] = tuple(ATTENTION_TITLES),
    last_layer_only: bool = False,
) -> dict[str, Figure]:
    """Grids of one sentence pair's attention, one figure per kind.

    Rows of each map are queries: source tokens for the encoder's, output tokens for the
    decoder's. Keys: source tokens, or the decoder's inputs (BOS + outputs but the last).
    """
    axes = {"encoder_self": (view.src_tokens, view.src_tokens),
            "decoder_self": (view.output_tokens, view.input_tokens),
            "cross": (view.output_tokens, view.src_tokens)}
    source, target = view.languages
    languages = {"encoder_self": (source, source), "decoder_self": (target, target), "cross": (target, source)}
    figures = {}
    for kind in kinds:
        layers = getattr(view.attention.maps, kind)  # per layer (heads, Lq, Lk)
        if not layers:  # a model without this kind of attention (the cross-attention ablation)
            continue
        first_layer = len(layers) if last_layer_only else 1
        figures[kind] = attention_grid(layers[first_layer - 1 :], *axes[kind], ATTENTION_TITLES[kind] + caption,
                                       first_layer=first_layer, languages=languages[kind])
    return figures


def save_figure(fig: Figure, path: str | Path) -> None:
    """Write a figure as PNG and free its memory."""
    fig.savefig(path, dpi=80)
    plt.close(fig)
