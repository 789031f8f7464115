"""Token-budget batching: sentences of similar length together, at most ``max_tokens`` per batch.

A batch's cost is its padded size, ``batch_size × longest sentence``; grouping by length
keeps padding small, and the budget keeps every step's work about equal. ``Collator`` cuts a
batch of rows into the model's tensors, on the host or on the device (``device_batches.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import torch
from torch import Tensor
from torch.utils.data import Sampler


def token_batches(lengths: Sequence[int] | np.ndarray, max_tokens: int, order: Sequence[int] | np.ndarray
                  ) -> list[np.ndarray]:
    """Cut ``order`` (indices sorted by length, shortest first) into batches whose padded size fits the budget:
    each batch takes as many of the next indices as ``count × longest`` allows. A NumPy search per batch, not a
    Python step per index: ten million pairs are cut in seconds."""
    order = np.asarray(order, dtype=np.int64)
    sorted_lengths = np.asarray(lengths, dtype=np.int64)[order]
    if len(order) and (too_long := np.flatnonzero(sorted_lengths > max_tokens)).size:
        index = order[too_long[0]]
        raise ValueError(f"example {index} has {sorted_lengths[too_long[0]]} tokens, more than max_tokens={max_tokens}")
    batches, start = [], 0
    while start < len(order):
        window = sorted_lengths[start : start + max_tokens // max(sorted_lengths[start], 1) + 1]
        counts = np.arange(1, len(window) + 1)
        size = int(np.argmax(counts * window > max_tokens)) or len(window)  # the first count over budget, else all
        batches.append(order[start : start + size])
        start += size
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
        self.lengths, self.max_tokens = np.asarray(lengths, dtype=np.int64), max_tokens
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
        lengths = torch.from_numpy(self.lengths).double()
        noise = torch.rand(len(lengths), generator=generator, dtype=torch.float64) if self.shuffle else 0
        order = torch.argsort(lengths + noise, stable=True)  # shuffled: a random order among equal lengths
        batches = token_batches(self.lengths, self.max_tokens, order.numpy())
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
        return (batch.tolist() for batch in self._batches())

    def __len__(self) -> int:
        return len(self._batches())


def pad_batch(sequences: list[list[int]], pad_id: int) -> Tensor:
    """Right-pad id lists to the longest one: (batch, longest)."""
    # The lists end to end, each cut out as its own row: the batches' arithmetic, on the host.
    return cut(IdLists.of(sequences), torch.arange(len(sequences)), max(map(len, sequences)), pad_id)


class IdLists(NamedTuple):
    """Id lists end to end: all ids (int32), each list's start and each list's length (int64)."""

    flat: Tensor
    starts: Tensor
    lengths: Tensor

    @classmethod
    def of(cls, sequences: Sequence[Sequence[int]]) -> IdLists:
        """From Python lists (a few thousand: an evaluation split, a batch to translate)."""
        lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
        flat = torch.tensor([i for s in sequences for i in s] or [0], dtype=torch.int32)
        return cls(flat, torch.cumsum(lengths, 0) - lengths, lengths)

    @classmethod
    def of_arrow(cls, column: pa.ChunkedArray | pa.Array) -> IdLists:
        """From an Arrow column of id lists (a split's ``src_ids``), without a Python object per list or id."""
        lists = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        offsets = lists.offsets.to_numpy().astype(np.int64)
        flat = lists.flatten().to_numpy(zero_copy_only=False).astype(np.int32)  # (a copy of its own, writable)
        return cls(torch.from_numpy(flat if len(flat) else np.zeros(1, np.int32)), torch.from_numpy(offsets[:-1] - offsets[0]),
                   torch.from_numpy(np.diff(offsets)))

    def to(self, device: torch.device | str) -> IdLists:
        return IdLists(*(part.to(device) for part in self))

    def __add__(self, other: IdLists) -> IdLists:  # type: ignore[override]  # one after the other
        return IdLists(torch.cat([self.flat, other.flat]), torch.cat([self.starts, other.starts + len(self.flat)]),
                       torch.cat([self.lengths, other.lengths]))

    def __len__(self) -> int:  # type: ignore[override]
        return len(self.lengths)

    def lists(self) -> list[list[int]]:
        """As Python lists (a small split's)."""
        return [self.flat[start : start + length].tolist() for start, length in zip(self.starts.tolist(),
                                                                                  self.lengths.tolist())]


def cut(part: IdLists, rows: Tensor, width: int, pad_id: int) -> Tensor:
    """The lists ``rows`` (B,) of ``part``, right-padded to ``width``: (B, width), int64."""
    flat, starts, lengths = part
    columns = torch.arange(width, device=flat.device)  # (width,)
    inside = columns[None, :] < lengths[rows, None]  # (B, width)
    index = (starts[rows, None] + columns[None, :]).clamp(max=flat.numel() - 1)
    return torch.where(inside, flat[index].long(), pad_id)


class Collator:
    """Indices -> padded tensors: src (B, S) ends in EOS; tgt_in = BOS + tgt; tgt_out = tgt + EOS; with ``alignments``
    (each target token's source position, -1: none), ``alignment`` (B, T) beside tgt_out, -1 at EOS and padding.
    The ids are copied to ``device`` once, and each batch is cut out of them there by index arithmetic."""

    def __init__(self, src_ids: IdLists | list[list[int]], tgt_ids: IdLists | list[list[int]], pad_id: int,
                 bos_id: int, eos_id: int, alignments: IdLists | list[list[int]] | None = None,
                 device: torch.device | str = "cpu"):
        self.pad_id, self.bos_id, self.eos_id, self.device = pad_id, bos_id, eos_id, torch.device(device)
        src, tgt = (ids if isinstance(ids, IdLists) else IdLists.of(ids) for ids in (src_ids, tgt_ids))
        self.src_len, self.tgt_len = src.lengths.numpy(), tgt.lengths.numpy()  # host copies: the widths
        self.src, self.tgt = src.to(self.device), tgt.to(self.device)
        if alignments is not None and not isinstance(alignments, IdLists):
            alignments = IdLists.of(alignments)
        self.alignments = None if alignments is None else alignments.to(self.device)

    def __call__(self, indices: list[int], on_device: Tensor | None = None) -> dict[str, Tensor]:
        """The batch of the rows ``indices``; ``on_device``: the same indices as a tensor already on the device (its
        widths are read from ``indices``, on the host, so that cutting never waits for the device)."""
        rows = torch.tensor(indices, dtype=torch.long, device=self.device) if on_device is None else on_device
        tgt_width = int(self.tgt_len[indices].max()) + 1  # BOS or EOS
        body = cut(self.tgt, rows, tgt_width, self.pad_id)  # (B, T): tgt, padded
        batch = {"src": cut(self.src, rows, int(self.src_len[indices].max()), self.pad_id),  # (B, S)
                 "tgt_in": torch.nn.functional.pad(body[:, :-1], (1, 0), value=self.bos_id),  # BOS + tgt
                 "tgt_out": body.scatter(1, self.tgt[2][rows, None], self.eos_id),  # tgt + EOS
                 "index": rows}
        if self.alignments is not None:  # beside tgt_out: -1 at EOS and padding
            batch["alignment"] = cut(self.alignments, rows, tgt_width, -1)
        return batch
