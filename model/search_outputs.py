"""What a search returns: its hypotheses as tensors, and each sentence's output as lists."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from torch import Tensor


class Hypotheses(NamedTuple):
    """What a search found: ids without BOS, padded after their EOS (..., T); their length-normalized scores
    (...); each id's log-probability under the model, given the source and the ids before it (..., T)."""

    tokens: Tensor
    scores: Tensor
    log_probs: Tensor
    attention: Tensor | None = None  # where each id's row looked in the source (..., T, S), when kept


@dataclass
class Output:
    """One sentence as a search produced it: its ids (up to and including the EOS it reached) and each one's
    log-probability; an engine that gives only their sum leaves ``token_log_probs`` None, one that gives
    nothing both. A beam search with scores also gives the beam's other hypotheses (``alternatives``)."""

    ids: list[int]
    token_log_probs: list[float] | None = None
    log_prob: float | None = None  # the ids' total log-probability
    # The beam's next best hypotheses in its order (``search.MAX_ALTERNATIVES`` at most), as far as the search
    # took them (it stops once the best is decided: some never end); what ``model.confidence.agreement`` compares
    # the output with. [] for greedy.
    alternatives: list[list[int]] = field(default_factory=list)
    attention: Tensor | None = None  # (ids, source positions): the cross-attention of the row that chose each id

    @property
    def score(self) -> float | None:
        """Mean log-probability per output token (Seq-Logprob): how sure the model was of this output, 0 at best."""
        return None if self.log_prob is None else self.log_prob / max(len(self.ids), 1)


def produced(tokens: Tensor, log_probs: Tensor, eos_id: int, pad_id: int) -> list[Output]:
    """(B, T) ids and their log-probabilities -> per sentence its ``Output``: up to and including the first
    EOS, padding removed. Log-probabilities (B, 0): not kept, outputs without scores."""
    all_ids = produced_ids(tokens, eos_id, pad_id)
    if log_probs.size(-1) == 0:
        return [Output(ids) for ids in all_ids]
    outputs = []
    for ids, row, row_log_probs in zip(all_ids, tokens.tolist(), log_probs.tolist()):
        kept = [log_prob for t, log_prob in zip(row, row_log_probs) if t != pad_id][: len(ids)]
        outputs.append(Output(ids, kept, sum(kept)))
    return outputs


def produced_ids(tokens: Tensor, eos_id: int, pad_id: int) -> list[list[int]]:
    """(B, T) ids -> per-sentence id lists up to and including the first EOS, padding removed."""
    result = []
    for row in tokens.tolist():
        ids = []
        for t in row:
            if t != pad_id:
                ids.append(t)
            if t == eos_id:
                break
        result.append(ids)
    return result
