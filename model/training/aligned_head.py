"""One cross-attention head trained to align words (Garg et al. 2019, "Jointly Learning to Align and Translate with
Transformer Models"): which head, and the loss that pulls its attention toward the training pairs' alignments."""

from __future__ import annotations

from torch import Tensor


def aligned_index(layers: int, heads: int, layer: int | None, head: int) -> tuple[int, int]:
    """The aligned head as (decoder layer, head), both from 0, from the settings' ``layer`` (from 1; negative: from the
    last; None: the penultimate, as Garg et al., or the only one) and ``head`` (from 1), in a decoder of ``layers``
    layers of ``heads`` cross-attention heads; a ValueError in one line where it has no such head."""
    index = max(layers - 2, 0) if layer is None else layer - 1 if layer > 0 else layers + layer
    if not (0 <= index < layers and 1 <= head <= heads):
        raise ValueError(f"module.aligned_layer={'null' if layer is None else layer}, module.aligned_head={head}: no "
                         f"such cross-attention head in a decoder of {layers} layers of {heads} heads")
    return index, head - 1


def alignment_loss(weights: Tensor, alignment: Tensor) -> Tensor:
    """Mean cross-entropy of one head's attention ``weights`` (B, T, S) toward the source position each target token is
    aligned to, ``alignment`` (B, T), -1 where none (Garg et al. 2019); averaged without indexing by the mask."""
    guided = alignment >= 0  # (B, T)
    picked = weights.gather(-1, alignment.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, T): weight on the aligned
    nll = -picked.float().clamp(min=1e-9).log()
    return (nll * guided.float()).sum() / guided.sum().clamp(min=1)
