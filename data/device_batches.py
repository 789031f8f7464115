"""Token-budget batches built on the device, from token ids that live there.

The tokenized splits are a few bytes per token (Tatoeba's: a few MB): on a GPU they are copied to it once (``Collator``), and each step's padded
batch is cut out of them there, so a step needs no loader worker and no host-to-device copy.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from data.sampler import Collator, TokenBucketBatchSampler


class DeviceBatches:
    """An iterable of ``collate``'s batches made on its device, one per sampler batch, as a ``DataLoader`` over
    ``rows`` gives them on the host.

    ``rows`` are the split's row numbers the sampler's positions refer to. Lightning finds the
    sampler as ``.sampler`` / ``.batch_sampler`` and calls its ``set_epoch``, as for a ``DataLoader``.
    """

    def __init__(self, collate: Collator, rows: Sequence[int] | np.ndarray, sampler: TokenBucketBatchSampler) -> None:
        self.collate, self.rows, self.sampler, self.batch_sampler = collate, np.asarray(rows), sampler, sampler

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        batches = [self.rows[batch] for batch in self.sampler]  # this epoch's rows, cut on the host
        # One host-to-device copy per epoch: every batch's rows end to end. From pinned memory
        # the copy is asynchronous: the host does not wait for the steps still queued on the GPU.
        epoch_rows = torch.from_numpy(np.concatenate(batches) if batches else np.zeros(0, np.int64)).long()
        if self.collate.device.type == "cuda":
            epoch_rows = epoch_rows.pin_memory()
        epoch_rows = epoch_rows.to(self.collate.device, non_blocking=True)
        for batch, on_device in zip(batches, epoch_rows.split([len(batch) for batch in batches])):
            yield self.collate(batch, on_device)
