"""The beam search as it was first written, kept frozen: the plain algorithm the fast one must equal.

Every source row is repeated k times before the encoder, every cache (self- and cross-attention)
is re-gathered at every step, and the batch runs until its last sentence ends. ``model/search.py``
encodes once, shares the memory, gathers only the self-attention cache and drops sentences as they
end; ``tests/test_search.py`` checks that it produces exactly these hypotheses.
"""

from __future__ import annotations

import torch
from torch import Tensor

from model.search import SearchConfig, length_penalty_factor, output_limits
from model.transformer import Seq2SeqTransformer


@torch.no_grad()
def plain_beam_hypotheses(model: Seq2SeqTransformer, src: Tensor, bos_id: int, eos_id: int,
                          config: SearchConfig) -> tuple[Tensor, Tensor]:
    """src (B, S) -> hypotheses (B, k, T), best first, and their normalized scores (B, k)."""
    pad_id, batch, k = model.pad_id, src.size(0), config.beam_size
    device = src.device
    limits = output_limits(src, pad_id, config, model.max_len).repeat_interleave(k)  # (B·k,)
    src = src.repeat_interleave(k, dim=0)  # (B·k, S): row b*k + j is hypothesis j of sentence b
    memory = model.encode(src)
    cache = model.new_cache()
    tokens = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=device)
    scores = torch.zeros(batch, k, device=device)
    scores[:, 1:] = float("-inf")
    finished = torch.zeros(batch * k, dtype=torch.bool, device=device)
    lengths = torch.zeros(batch * k, device=device)
    frozen = torch.full((model.tgt_vocab_size,), float("-inf"), device=device)
    frozen[pad_id] = 0.0
    for step in range(int(limits.max())):
        logits = model.decode(tokens[:, -1:], memory, src, cache)[:, -1].float()
        log_probs = torch.where(finished[:, None], frozen, logits.log_softmax(dim=-1))  # (B·k, vocab)
        vocab = log_probs.size(-1)
        scores, flat_index = (scores.view(-1, 1) + log_probs).view(batch, k * vocab).topk(k, dim=-1)
        origin = (flat_index // vocab + torch.arange(batch, device=device)[:, None] * k).view(-1)
        next_token = (flat_index % vocab).view(-1)
        for layer_cache in cache.self_attn + cache.cross_attn:  # every cache follows the beam
            layer_cache.reorder(origin)
        finished, lengths = finished[origin], lengths[origin]
        lengths = lengths + (~finished).float()
        tokens = torch.cat([tokens[origin], next_token[:, None]], dim=1)
        finished = finished | (next_token == eos_id) | (limits <= step + 1)
        if finished.all():
            break
    normalized = scores / length_penalty_factor(lengths.view(batch, k), config.length_penalty)
    order = normalized.sort(dim=-1, descending=True, stable=True).indices
    hypotheses = tokens[:, 1:].view(batch, k, -1)
    return hypotheses.gather(1, order[..., None].expand_as(hypotheses)), normalized.gather(1, order)
