"""Token-budget batches built on the device, from token ids that live there.

The tokenized splits are a few MB: on a GPU they are copied to it once, and each step's
padded batch is cut out of them by index arithmetic, so a step needs no loader worker and no
host-to-device copy. The batches are the ``TokenBucketBatchSampler``'s (similar lengths,
token budget, a new shuffle every epoch, one shard per rank) and equal, tensor for tensor,
what ``Collator`` (``sampler.py``) makes of them on the host.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from data.sampler import TokenBucketBatchSampler


def flatten(sequences: Sequence[Sequence[int]], device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """Id lists -> (all ids end to end, each list's start, each list's length), on ``device``."""
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    starts = torch.cumsum(lengths, 0) - lengths
    flat = torch.tensor([i for s in sequences for i in s] or [0], dtype=torch.long)
    return flat.to(device), starts.to(device), lengths.to(device)


def cut(flat: Tensor, starts: Tensor, lengths: Tensor, width: int, pad_id: int) -> Tensor:
    """Rows of ``flat`` beginning at ``starts`` (B,), right-padded to ``width``: (B, width)."""
    columns = torch.arange(width, device=flat.device)  # (width,)
    inside = columns[None, :] < lengths[:, None]  # (B, width)
    index = (starts[:, None] + columns[None, :]).clamp(max=flat.numel() - 1)
    return torch.where(inside, flat[index], pad_id)


class DeviceBatches:
    """An iterable of batches ``{"src", "tgt_in", "tgt_out", "index"}`` made on ``device``, one per
    sampler batch: src (B, S) ends in EOS; tgt_in = BOS + tgt; tgt_out = tgt + EOS.

    ``rows`` are the split's row numbers the sampler's positions refer to. Lightning finds the
    sampler as ``.sampler`` / ``.batch_sampler`` and calls its ``set_epoch``, as for a ``DataLoader``.
    """

    def __init__(self, src_ids: Sequence[list[int]], tgt_ids: Sequence[list[int]], rows: Sequence[int],
                 sampler: TokenBucketBatchSampler, pad_id: int, bos_id: int, eos_id: int,
                 device: torch.device | str, alignments: Sequence[list[int]] | None = None) -> None:
        self.sampler, self.device = sampler, torch.device(device)
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.rows = list(rows)
        self._src_len = [len(src_ids[r]) for r in self.rows]  # host copies: each batch's width
        self._tgt_len = [len(tgt_ids[r]) for r in self.rows]
        # Copied once: (ids end to end, starts, lengths) of the kept rows, in ``rows`` order.
        self._src = flatten([src_ids[r] for r in self.rows], self.device)
        self._tgt = flatten([tgt_ids[r] for r in self.rows], self.device)
        self._row_ids = torch.tensor(self.rows, dtype=torch.long).to(self.device)
        self._alignments = None if alignments is None else flatten([alignments[r] for r in self.rows], self.device)

    @property
    def batch_sampler(self) -> TokenBucketBatchSampler:
        return self.sampler

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        batches = list(self.sampler)  # this epoch's positions, cut and shuffled on the host
        # One host-to-device copy per epoch: every batch's positions end to end. From pinned memory
        # the copy is asynchronous: the host does not wait for the steps still queued on the GPU.
        positions = torch.tensor([p for batch in batches for p in batch], dtype=torch.long)
        if self.device.type == "cuda":
            positions = positions.pin_memory()
        positions = positions.to(self.device, non_blocking=True)
        start = 0
        for batch in batches:
            stop = start + len(batch)
            src_width = max(self._src_len[p] for p in batch)
            tgt_width = max(self._tgt_len[p] for p in batch) + 1  # BOS or EOS
            yield self._batch(positions[start:stop], src_width, tgt_width)
            start = stop

    def _batch(self, positions: Tensor, src_width: int, tgt_width: int) -> dict[str, Tensor]:
        src = self._cut(self._src, positions, src_width)  # (B, S)
        body = self._cut(self._tgt, positions, tgt_width)  # (B, T): tgt, padded
        tgt_lengths = self._tgt[2][positions]
        bos = torch.full_like(body[:, :1], self.bos_id)
        tgt_in = torch.cat([bos, body[:, :-1]], dim=1)  # BOS + tgt
        tgt_out = body.scatter(1, tgt_lengths[:, None], self.eos_id)  # tgt + EOS
        batch = {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out, "index": self._row_ids[positions]}
        if self._alignments is not None:  # beside tgt_out: -1 at EOS and padding
            batch["alignment"] = self._cut(self._alignments, positions, tgt_width, pad=-1)
        return batch

    def _cut(self, part: tuple[Tensor, Tensor, Tensor], positions: Tensor, width: int,
             pad: int | None = None) -> Tensor:
        flat, starts, lengths = part
        return cut(flat, starts[positions], lengths[positions], width, self.pad_id if pad is None else pad)
