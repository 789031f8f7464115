"""Token-budget batching: sentences of similar length together, at most ``max_tokens`` per batch.

A batch's cost is its padded size, ``batch_size × longest sentence``; grouping by length
keeps padding small, and the budget keeps every step's work about equal. ``Collator`` cuts a
batch of rows into the model's tensors, on the host or on the device (``device_batches.py``).
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

    def _batches(self) -> list[list[int]]:
        """This rank's batches of the epoch."""
        if self._cached is not None and self._cached[0] == self.epoch:
            return self._cached[1]
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        lengths = torch.tensor(self.lengths, dtype=torch.float64)
        noise = torch.rand(len(lengths), generator=generator, dtype=torch.float64) if self.shuffle else 0
        order = torch.argsort(lengths + noise, stable=True)  # shuffled: a random order among equal lengths
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
        self._cached = (self.epoch, batches[self.rank :: self.num_replicas])
        return self._cached[1]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._batches())

    def __len__(self) -> int:
        return len(self._batches())


def pad_batch(sequences: list[list[int]], pad_id: int) -> Tensor:
    """Right-pad id lists to the longest one: (batch, longest)."""
    # The lists end to end, each cut out as its own row: the batches' arithmetic, on the host.
    return cut(flatten(sequences, "cpu"), torch.arange(len(sequences)), max(map(len, sequences)), pad_id)


def flatten(sequences: Sequence[Sequence[int]], device: torch.device | str) -> tuple[Tensor, Tensor, Tensor]:
    """Id lists -> (all ids end to end, each list's start, each list's length), on ``device``."""
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    starts = torch.cumsum(lengths, 0) - lengths
    flat = torch.tensor([i for s in sequences for i in s] or [0], dtype=torch.long)
    return flat.to(device), starts.to(device), lengths.to(device)


def cut(part: tuple[Tensor, Tensor, Tensor], rows: Tensor, width: int, pad_id: int) -> Tensor:
    """The lists ``rows`` (B,) of a ``flatten``ed part, right-padded to ``width``: (B, width)."""
    flat, starts, lengths = part
    columns = torch.arange(width, device=flat.device)  # (width,)
    inside = columns[None, :] < lengths[rows, None]  # (B, width)
    index = (starts[rows, None] + columns[None, :]).clamp(max=flat.numel() - 1)
    return torch.where(inside, flat[index], pad_id)


class Collator:
    """Indices -> padded tensors: src (B, S) ends in EOS; tgt_in = BOS + tgt; tgt_out = tgt + EOS; with ``alignments``
    (each target token's source position, -1: none), ``alignment`` (B, T) beside tgt_out, -1 at EOS and padding.
    The ids are copied to ``device`` once, and each batch is cut out of them there by index arithmetic."""

    def __init__(self, src_ids: list[list[int]], tgt_ids: list[list[int]], pad_id: int, bos_id: int, eos_id: int,
                 alignments: list[list[int]] | None = None, device: torch.device | str = "cpu"):
        self.pad_id, self.bos_id, self.eos_id, self.device = pad_id, bos_id, eos_id, torch.device(device)
        self.src_len, self.tgt_len = [len(s) for s in src_ids], [len(t) for t in tgt_ids]  # host copies: the widths
        self.src, self.tgt = flatten(src_ids, self.device), flatten(tgt_ids, self.device)
        self.alignments = None if alignments is None else flatten(alignments, self.device)

    def __call__(self, indices: list[int], on_device: Tensor | None = None) -> dict[str, Tensor]:
        """The batch of the rows ``indices``; ``on_device``: the same indices as a tensor already on the device (its
        widths are read from ``indices``, on the host, so that cutting never waits for the device)."""
        rows = torch.tensor(indices, dtype=torch.long, device=self.device) if on_device is None else on_device
        tgt_width = max(self.tgt_len[i] for i in indices) + 1  # BOS or EOS
        body = cut(self.tgt, rows, tgt_width, self.pad_id)  # (B, T): tgt, padded
        batch = {"src": cut(self.src, rows, max(self.src_len[i] for i in indices), self.pad_id),  # (B, S)
                 "tgt_in": torch.nn.functional.pad(body[:, :-1], (1, 0), value=self.bos_id),  # BOS + tgt
                 "tgt_out": body.scatter(1, self.tgt[2][rows, None], self.eos_id),  # tgt + EOS
                 "index": rows}
        if self.alignments is not None:  # beside tgt_out: -1 at EOS and padding
            batch["alignment"] = cut(self.alignments, rows, tgt_width, -1)
        return batch
