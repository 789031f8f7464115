"""Batched greedy and beam search with the incremental-decoding cache, behind one entry point, ``search()``, as the
Annotated Transformer's ``decode(encode(src))`` and JoeyNMT's ``search()``: validation, test and ``translate.py`` all
translate through it. Each step feeds only the newest token; earlier keys and values come from the cache.
``sentence_attention`` recomputes, by teacher forcing, every attention weight of one translated sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from model.search_outputs import Hypotheses, Output, produced, produced_ids
from model.transformer import AttentionMaps, Seq2SeqTransformer


# Wider beams cost memory and time in proportion and translate no better (large beams even favour
# short, empty outputs: Koehn and Knowles, 2017), so the width is capped.
MAX_BEAM = 64
# Hypotheses decoded at once (batch x beam): a larger batch is searched in parts, so memory stays
# bounded whatever the batch and beam. Far above what the default batches and beams reach.
MAX_SEARCH_ROWS = 2048
# The beam's next best hypotheses kept beside each output (with scores), for the agreement to read: a default
# beam's all; a wider beam keeps no more, so that scoring costs the same at any width.
MAX_ALTERNATIVES = 4


@dataclass(frozen=True)
class SearchConfig:
    """How to search: beam width (1 = greedy), GNMT length penalty, output length limit; the one place the search
    defaults are written (the training config and translate.py start from it)."""

    beam_size: int = 5
    length_penalty: float = 0.6  # alpha; 0 ranks hypotheses by raw log-probability
    max_len_a: float = 1.5  # longest output = a * source length + b tokens
    max_len_b: int = 10

    def __post_init__(self) -> None:
        if not 1 <= self.beam_size <= MAX_BEAM:
            raise ValueError(f"beam_size must be between 1 (greedy) and {MAX_BEAM}, got {self.beam_size}")
        if self.max_len_a < 0:
            raise ValueError(f"max_len_a must not be negative, got {self.max_len_a}")

    @property
    def greedy(self) -> SearchConfig:
        """The same length limits with beam size 1."""
        return replace(self, beam_size=1)


@dataclass
class SentenceAttention:
    """Every attention weight of one translated sentence, with the token ids on each axis."""

    src_ids: list[int]  # encoder positions: queries and keys of encoder self-attention, keys of cross
    input_ids: list[int]  # decoder inputs: BOS + all outputs but the last (keys of decoder self-attention)
    output_ids: list[int]  # decoder outputs, as the search produced them (EOS included when it ended)
    maps: AttentionMaps  # per layer (heads, query_len, key_len)


# Asked at every step of a search, when given: which source rows to keep searching (B,). A row not kept
# ends there: its output is cut, the others are unchanged.
KeepRows = Callable[[], list[bool]]
# The cross-attention a search keeps for word alignments: None (none), "averaged" (every layer and head) or one
# (decoder layer, head), from 0.
Attending = tuple[int, int] | str | None


@torch.no_grad()
def search(model: Seq2SeqTransformer, src: Tensor, bos_id: int, eos_id: int, config: SearchConfig = SearchConfig(),
           keep_rows: KeepRows | None = None, scores: bool = True, attention: Attending = None) -> list[Output]:
    """Translate a right-padded batch src (B, S) by greedy or beam search. Returns per source row the output as
    produced: its ids up to and including the EOS when the search reached one, without padding (the tokenizer's
    decoding drops the EOS), their log-probabilities, read from the search itself, and the beam's other hypotheses
    (``scores=False``: neither, a little faster); with ``attention``, the cross-attention each output id was chosen
    with. More than ``MAX_SEARCH_ROWS`` hypotheses are searched in parts of that many."""
    part = max(1, MAX_SEARCH_ROWS // config.beam_size)  # source rows per part
    if src.size(0) > part:
        return [ids for start in range(0, src.size(0), part)
                for ids in search(model, src[start : start + part], bos_id, eos_id, config,
                                  keep_rows and (lambda start=start: keep_rows()[start : start + part]), scores,
                                  attention)]
    if config.beam_size == 1:
        found = greedy_decode(model, src, bos_id, eos_id, config, keep_rows=keep_rows, token_scores=scores,
                              attention=attention)
        outputs = produced(found.tokens, found.log_probs, eos_id, model.pad_id)
    else:  # sentences end once their best is decided; with scores, the beam's others come along as alternatives
        found = beam_hypotheses(model, src, bos_id, eos_id, config, True, keep_rows, scores, attention)  # (B, k, T)
        outputs = produced(found.tokens[:, 0], found.log_probs[:, 0], eos_id, model.pad_id)
        for output, others in zip(outputs, found.tokens[:, 1 : 1 + MAX_ALTERNATIVES] if scores else []):
            output.alternatives = produced_ids(others, eos_id, model.pad_id)
        found = found._replace(attention=None if found.attention is None else found.attention[:, 0])
    for output, rows in zip(outputs, found.attention if found.attention is not None else []):
        output.attention = rows[: len(output.ids)].cpu()  # (ids, S)
    return outputs


def dropped_rows(keep_rows: KeepRows | None, device: torch.device) -> Tensor | bool:
    """(B,) True for the source rows not kept (False when nobody asks)."""
    return False if keep_rows is None else ~torch.tensor(keep_rows(), dtype=torch.bool, device=device)


@torch.no_grad()
def sentence_attention(model: Seq2SeqTransformer, src_ids: list[int], output_ids: list[int],
                       bos_id: int) -> SentenceAttention:
    """Attention weights of one sentence pair by teacher forcing (equal to those of cached decoding); ``src_ids``
    without padding, ``output_ids`` as ``search`` returned them."""
    device = next(model.parameters()).device
    input_ids = [bos_id] + output_ids[:-1]
    maps = model.attention_maps(torch.tensor([src_ids], device=device), torch.tensor([input_ids], device=device))
    first = AttentionMaps(*([m[0].float() for m in layers] for layers in (maps.encoder_self, maps.decoder_self,
                                                                          maps.cross)))
    return SentenceAttention(src_ids, input_ids, output_ids, first)


def output_limits(src: Tensor, pad_id: int, config: SearchConfig, limit: int) -> Tensor:
    """Longest output of each sentence (B,): a · (its source length) + b, capped by the model's positions; per
    sentence, not per batch: a translation does not depend on the sentences batched with it."""
    src_len = (src != pad_id).sum(dim=1).float()
    return (config.max_len_a * src_len + config.max_len_b).long().clamp(min=1, max=limit - 1)


@torch.no_grad()
def greedy_decode(model: Seq2SeqTransformer, src: Tensor, bos_id: int, eos_id: int,
                  config: SearchConfig = SearchConfig(), use_cache: bool = True,
                  keep_rows: KeepRows | None = None, token_scores: bool = True, attention: Attending = None) -> Hypotheses:
    """src (B, S) -> tokens (B, T) without BOS, ending at EOS, then padded with ``pad_id``; their scores (B,)
    as a beam of one would rank them, and each token's log-probability (B, T), 0 at padding
    (``token_scores=False``: neither, (B,) zeros and (B, 0)). Only ``config``'s length limits apply;
    ``use_cache=False`` re-runs the whole prefix each step."""
    pad_id, batch = model.pad_id, src.size(0)
    limits = output_limits(src, pad_id, config, model.max_len)  # (B,)
    memory = model.encode(src)
    cache = model.new_cache() if use_cache else None
    tokens = torch.full((batch, 1), bos_id, dtype=torch.long, device=src.device)
    log_probs = torch.zeros(batch, 0, device=src.device)  # (B, steps so far)
    rows = torch.zeros(batch, 0, src.size(1), device=src.device)  # (B, steps so far, S): with ``attention``
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    for step in range(int(limits.max())):
        step_input = tokens[:, -1:] if use_cache else tokens  # uncached: re-run the whole prefix
        logits, looked = decode_step(model, step_input, memory, src, cache, attention)  # (B, vocab), (B, S)
        rows = rows if looked is None else torch.cat([rows, looked[:, None]], dim=1)
        next_token = logits.argmax(dim=-1)
        if token_scores:  # its log-probability: its logit less the log of the softmax's denominator (no softmax kept)
            log_prob = logits.gather(1, next_token[:, None]).squeeze(1) - logits.logsumexp(dim=-1)
            log_probs = torch.cat([log_probs, log_prob.masked_fill(finished, 0.0)[:, None]], dim=1)
        next_token = next_token.masked_fill(finished, pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        finished |= (next_token == eos_id) | (limits <= step + 1)  # ended, or at its own length limit
        finished |= dropped_rows(keep_rows, src.device)
        if finished.all():
            break
    lengths = (tokens[:, 1:] != pad_id).sum(dim=1)  # the EOS counts, padding does not
    normalized = log_probs.sum(dim=1) / length_penalty_factor(lengths, config.length_penalty)
    return Hypotheses(tokens[:, 1:], normalized, log_probs, None if attention is None else rows)


def decode_step(model: Seq2SeqTransformer, step_input: Tensor, memory: Tensor, src: Tensor, cache,
                attention: Attending) -> tuple[Tensor, Tensor | None]:
    """The last position's logits (rows, vocab), in float32, and with ``attention`` its cross-attention (rows, S)."""
    if attention is None:
        return model.decode(step_input, memory, src, cache)[:, -1].float(), None
    logits, weights = model.decode_attending(step_input, memory, src, cache, None if attention == "averaged"
                                             else attention)
    return logits[:, -1].float(), weights[:, -1].float()


def length_penalty_factor(length: Tensor, alpha: float) -> Tensor:
    """GNMT length penalty ((5 + length) / 6) ** alpha; alpha = 0 ranks by raw log-probability."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model: Seq2SeqTransformer, src: Tensor, bos_id: int, eos_id: int, config: SearchConfig = SearchConfig(),
                keep_rows: KeepRows | None = None, token_scores: bool = True) -> Hypotheses:
    """src (B, S) -> the best tokens (B, T) (as ``greedy_decode``), their normalized scores (B,), their
    tokens' log-probabilities (B, T)."""
    beams = beam_hypotheses(model, src, bos_id, eos_id, config, True, keep_rows, token_scores)
    return Hypotheses(*(None if found is None else found[:, 0] for found in beams))


@torch.no_grad()
def beam_hypotheses(model: Seq2SeqTransformer, src: Tensor, bos_id: int, eos_id: int,
                    config: SearchConfig = SearchConfig(), best_only: bool = False,
                    keep_rows: KeepRows | None = None, token_scores: bool = True,
                    attention: Attending = None) -> Hypotheses:
    """src (B, S) -> all ``beam_size`` hypotheses (B, k, T), best first, their normalized scores (B, k) and
    their tokens' log-probabilities (B, k, T) (``token_scores=False``: (B, k, 0), not kept).

    Finished hypotheses stay in the beam, frozen: they can only extend with padding at no
    cost, so they compete with the live ones until their sentence ends, when all k have
    finished; its rows then leave the batch. With ``beam_size=1`` this is exactly greedy decoding.
    Each source is encoded once; its k hypotheses share its memory (``DecoderLayer``).

    ``best_only``: a sentence also ends as soon as its best hypothesis is decided (``decided``); the
    first hypothesis is then exactly the one the whole search would give, the others are left unfinished.
    """
    pad_id, batch, k = model.pad_id, src.size(0), config.beam_size
    device = src.device
    limits = output_limits(src, pad_id, config, model.max_len)  # (B,)
    memory = model.encode(src)  # (B, S, d_model): once per sentence, not once per hypothesis
    cache = model.new_cache()
    sentence = torch.arange(batch, device=device)  # the input row of each sentence still searched
    # Row b*k + j of the hypothesis tensors is hypothesis j of (still searched) sentence b.
    tokens = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=device)
    scores = torch.zeros(batch, k, device=device)
    scores[:, 1:] = float("-inf")  # all k hypotheses start identical: keep only one alive
    finished = torch.zeros(batch * k, dtype=torch.bool, device=device)
    lengths = torch.zeros(batch * k, device=device)
    log_probs = torch.zeros(batch * k, 0, device=device)  # (B·k, steps so far): each token's, 0 at padding
    rows = torch.zeros(batch * k, 0, src.size(1), device=device)  # (B·k, steps so far, S): with ``attention``
    ended: list[tuple[Tensor, ...]] = []  # (sentences, tokens, scores, lengths, log_probs, rows) as they end
    for step in range(int(limits.max())):
        searched = scores.size(0)
        logits, looked = decode_step(model, tokens[:, -1:], memory, src, cache, attention)  # (B·k, vocab), (B·k, S)
        # Score of every continuation: the hypothesis's score + the token's log-probability (in place: at
        # (B·k, vocab) every pass over memory counts). A finished hypothesis may only continue with PAD, at no cost.
        candidates = logits.log_softmax(dim=-1).add_(scores.view(-1, 1))
        if finished.any():
            candidates[finished] = float("-inf")
            candidates[finished, pad_id] = scores.view(-1)[finished]
        vocab = candidates.size(-1)
        candidates = candidates.view(searched, k * vocab)  # (B, k·vocab)
        previous = scores.view(-1)
        scores, flat_index = candidates.topk(k, dim=-1)  # (B, k)
        origin = flat_index // vocab + torch.arange(searched, device=device)[:, None] * k  # (B, k)
        origin, next_token = origin.view(-1), (flat_index % vocab).view(-1)
        cache.reorder(origin)
        finished, lengths = finished[origin], lengths[origin]
        lengths = lengths + (~finished).float()  # EOS counts, padding does not
        tokens = torch.cat([tokens[origin], next_token[:, None]], dim=1)
        if token_scores:  # the new token's log-probability is what it added to its hypothesis's score (0: padding)
            log_probs = torch.cat([log_probs[origin], (scores.view(-1) - previous[origin])[:, None]], dim=1)
        if looked is not None:  # where the row that chose each new token looked
            rows = torch.cat([rows, looked[:, None]], dim=1)[origin]
        # Ended, or at its sentence's own length limit (hypotheses stay within their sentence's rows).
        finished = finished | (next_token == eos_id) | (limits.repeat_interleave(k) <= step + 1)
        done = finished.view(searched, k).all(dim=1)  # (B,): sentences whose k hypotheses all ended
        if best_only:
            done |= decided(scores, finished.view(searched, k), lengths.view(searched, k), limits, config.length_penalty)
        if keep_rows is not None:
            done |= dropped_rows(keep_rows, device)[sentence]  # its rows leave with the ended ones
        if not done.any():
            continue
        ended.append((sentence[done], tokens.view(searched, k, -1)[done], scores[done], lengths.view(searched, k)[done],
                      log_probs.view(searched, k, -1)[done], rows.view(searched, k, *rows.shape[1:])[done]))
        if done.all():
            break
        # The ended sentences leave the batch: the rest decode without them.
        kept = (~done).nonzero().squeeze(1)  # (B',)
        kept_rows = (kept[:, None] * k + torch.arange(k, device=device)).view(-1)  # (B'·k,)
        cache.keep(kept_rows, kept)
        memory, src, limits, sentence, scores = memory[kept], src[kept], limits[kept], sentence[kept], scores[kept]
        tokens, finished, lengths, log_probs, rows = (part[kept_rows] for part in
                                                      (tokens, finished, lengths, log_probs, rows))
    found = ranked_hypotheses(ended, batch, k, pad_id, config.length_penalty)
    return found if attention is not None else found._replace(attention=None)


def decided(scores: Tensor, finished: Tensor, lengths: Tensor, limits: Tensor, alpha: float) -> Tensor:
    """(B,) True where no hypothesis still going can change the beam's best: the best finished one, by
    length-normalized score, can neither be overtaken nor pushed out of the beam.

    Scores only fall as a hypothesis grows (log-probabilities are <= 0), so the highest raw score
    among live hypotheses, ``live``, bounds every descendant's. It cannot push out the best finished
    one (the beam keeps the k highest raw scores) if ``live`` < its raw score; it cannot overtake it
    if even at the longest allowed length, where the length penalty helps most, ``live`` / lp(limit)
    < its normalized score. Arguments: (B, k) scores, finished, lengths; (B,) length limits.
    """
    normalized = (scores / length_penalty_factor(lengths, alpha)).masked_fill(~finished, float("-inf"))
    best_normalized, best = normalized.max(dim=1)  # (B,)
    best_raw = scores.gather(1, best[:, None]).squeeze(1)
    live = scores.masked_fill(finished, float("-inf")).max(dim=1).values  # (B,); -inf when none is live
    ceiling = live / length_penalty_factor(limits.float(), alpha)
    return finished.any(dim=1) & (live < best_raw) & (ceiling < best_normalized)


def ranked_hypotheses(ended: list[tuple[Tensor, ...]], batch: int, k: int, pad_id: int, alpha: float) -> Hypotheses:
    """The sentences' beams as they ended, back in input order: hypotheses (B, k, T) without BOS,
    padded, best first by length-normalized score, those scores (B, k), their tokens' log-probabilities."""
    longest = max(tokens.size(-1) for _, tokens, *_ in ended) - 1
    device = ended[0][1].device
    hypotheses = torch.full((batch, k, longest), pad_id, dtype=torch.long, device=device)
    log_probs = torch.zeros(batch, k, longest if ended[0][4].size(-1) else 0, device=device)  # (B, k, 0): not kept
    normalized = torch.empty(batch, k, device=device)
    kept = ended[0][5].size(2) > 0  # the attention, when the search kept it: (B, k, T, S)
    attention = torch.zeros(batch, k, longest if kept else 0, ended[0][5].size(-1), device=device)
    for sentences, tokens, scores, lengths, token_log_probs, rows in ended:
        hypotheses[sentences, :, : tokens.size(-1) - 1] = tokens[..., 1:]  # BOS dropped
        log_probs[sentences, :, : token_log_probs.size(-1)] = token_log_probs
        attention[sentences, :, : rows.size(2)] = rows
        normalized[sentences] = scores / length_penalty_factor(lengths, alpha)
    # Best first; among equal scores the earlier hypothesis, as argmax would pick it.
    order = normalized.sort(dim=-1, descending=True, stable=True).indices  # (B, k)
    ranked = [found.gather(1, order.view(batch, k, *[1] * (found.dim() - 2)).expand_as(found))
              for found in (hypotheses, log_probs, attention)]
    return Hypotheses(ranked[0], normalized.gather(1, order), ranked[1], ranked[2])
