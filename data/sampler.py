"""Token-budget batching: sentences of similar length together, at most ``max_tokens`` per batch.

A batch's cost is its padded size, ``batch_size × longest sentence``; grouping by length
keeps padding small, and the budget keeps every step's work about equal. ``Collator`` pads a
batch of rows into the model's tensors on the host (``device_batches.py`` does it on the device).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor
from torch.utils.data import Sampler


def token_batches(lengths: Sequence[int], max_tokens: int, order: Sequence[int]) -> list[list[int]]:
    """Cut ``order`` (indices sorted by length) into batches whose padded size fits the budget."""
    batches, batch, longest = [], [], 0
    for index in order:
        length = lengths[index]
        if length > max_tokens:
            raise ValueError(f"example {index} has {length} tokens, more than max_tokens={max_tokens}")
        if batch and (len(batch) + 1) * max(longest, length) > max_tokens:
            batches.append(batch)
            batch, longest = [], 0
        batch.append(index)
        longest = max(longest, length)
    if batch:
        batches.append(batch)
    return batches


class TokenBucketBatchSampler(Sampler[list[int]]):
    """Length-bucketed batches under a token budget, reshuffled every epoch, shardable for DDP.

    Per epoch (seeded by ``seed + epoch``): sort by length with random tie-breaking, cut
    into budgeted batches, shuffle the batch order, then rank ``r`` of ``num_replicas``
    takes batches ``r, r + R, ...``. So that every rank runs the same number of steps
    without repeating examples, the largest batches are halved until the count divides
    (with fewer examples than ranks, a few batches are repeated).
    """

    def __init__(
        self,
        lengths: Sequence[int],
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        self.lengths, self.max_tokens = list(lengths), max_tokens
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.num_replicas, self.rank = num_replicas, rank
        self._cached: tuple[int, list[list[int]]] | None = None  # (epoch, batches): len() and iter() share it
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is not in [0, {num_replicas})")

    def set_epoch(self, epoch: int) -> None:
        """Called by Lightning at the start of every epoch: a new shuffle each epoch."""
        self.epoch = epoch

    @property
    def sampler(self) -> TokenBucketBatchSampler:
        """Itself. Lightning calls ``set_epoch`` on a loader's ``sampler`` and ``batch_sampler.sampler``,
        never on the batch sampler: without this, every epoch would repeat the first one's order."""
        return self

    def _all_batches(self) -> list[list[int]]:
        if self._cached is not None and self._cached[0] == self.epoch:
            return self._cached[1]
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        lengths = torch.tensor(self.lengths, dtype=torch.float64)
        if self.shuffle:  # random order among equal lengths
            order = torch.argsort(lengths + torch.rand(len(lengths), generator=generator, dtype=torch.float64))
        else:
            order = torch.argsort(lengths, stable=True)
        batches = token_batches(self.lengths, self.max_tokens, order.tolist())
        while len(batches) % self.num_replicas and any(len(b) > 1 for b in batches):
            largest = max(range(len(batches)), key=lambda i: len(batches[i]))
            half = len(batches[largest]) // 2
            batches[largest : largest + 1] = [batches[largest][:half], batches[largest][half:]]
        # Too few examples to split further: repeat some batches. Every rank must run the same
        # number of steps, or DDP's collective calls wait forever for the rank that stopped.
        batches += [batches[i % len(batches)] for i in range(-len(batches) % self.num_replicas)]
        if self.shuffle:
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
        self._cached = (self.epoch, batches)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._all_batches()
        return iter(batches[self.rank :: self.num_replicas])

    def __len__(self) -> int:
        return len(self._all_batches()[self.rank :: self.num_replicas])


def pad_batch(sequences: list[list[int]], pad_id: int) -> Tensor:
    """Right-pad id lists to the longest one: (batch, longest)."""
    out = torch.full((len(sequences), max(map(len, sequences))), pad_id, dtype=torch.long)
    for i, seq in enumerate(sequences):
        out[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


class Collator:
    """Indices -> padded tensors: src (B, S) ends in EOS; tgt_in = BOS + tgt; tgt_out = tgt + EOS; with ``alignments``
    (each target token's source position, -1: none), ``alignment`` (B, T) beside tgt_out, -1 at EOS and padding."""

    def __init__(self, src_ids: list[list[int]], tgt_ids: list[list[int]], pad_id: int, bos_id: int, eos_id: int,
                 alignments: list[list[int]] | None = None):
        self.src_ids, self.tgt_ids, self.alignments = src_ids, tgt_ids, alignments
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id

    def __call__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        src = [self.src_ids[i] for i in indices]
        tgt = [self.tgt_ids[i] for i in indices]
        batch = {
            "src": pad_batch(src, self.pad_id),
            "tgt_in": pad_batch([[self.bos_id] + t for t in tgt], self.pad_id),
            "tgt_out": pad_batch([t + [self.eos_id] for t in tgt], self.pad_id),
            "index": torch.tensor(indices, dtype=torch.long),
        }
        if self.alignments is not None:
            batch["alignment"] = pad_batch([self.alignments[i] + [-1] for i in indices], -1)
        return batch
