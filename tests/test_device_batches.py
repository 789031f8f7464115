"""data/device_batches.py: batches cut on the device equal batches padded by hand, epoch by epoch, rank by rank."""

import pytest
import torch
from lightning.fabric.utilities.data import _set_sampler_epoch

from data.device_batches import DeviceBatches
from data.sampler import Collator, TokenBucketBatchSampler, cut
from helpers import BOS, EOS, PAD, small_datamodule


def test_cut_pads_each_row_to_the_width():
    flat, starts, lengths = torch.tensor([5, 6, 7, 8, 9, 10]), torch.tensor([0, 2, 5]), torch.tensor([2, 3, 1])
    assert cut((flat, starts, lengths), torch.arange(3), 4, PAD).tolist() == [[5, 6, 0, 0], [7, 8, 9, 0], [10, 0, 0, 0]]
    assert cut((flat, starts, lengths), torch.tensor([2, 0]), 2, PAD).tolist() == [[10, 0], [5, 6]]


def test_the_collator_pads_each_side():
    src, tgt, aligned = [[5, 6, 2], [7, 2]], [[8], [9, 10, 11]], [[0], [1, -1, 0]]
    batch = Collator(src, tgt, PAD, BOS, EOS, alignments=aligned)([1, 0])
    assert batch["src"].tolist() == [[7, 2, PAD], [5, 6, 2]]
    assert batch["tgt_in"].tolist() == [[BOS, 9, 10, 11], [BOS, 8, PAD, PAD]]
    assert batch["tgt_out"].tolist() == [[9, 10, 11, EOS], [8, EOS, PAD, PAD]]
    assert batch["alignment"].tolist() == [[1, -1, 0, -1], [0, -1, -1, -1]] and batch["index"].tolist() == [1, 0]
    assert all(t.dtype == torch.long for t in batch.values())


def padded_by_hand(src, tgt, aligned, indices):
    """The batch of ``indices`` padded row by row in Python: an implementation apart from ``cut``'s arithmetic."""
    def padded(rows, pad):
        width = max(map(len, rows))
        return torch.tensor([row + [pad] * (width - len(row)) for row in rows], dtype=torch.long)

    return {"src": padded([src[i] for i in indices], PAD), "tgt_in": padded([[BOS] + tgt[i] for i in indices], PAD),
            "tgt_out": padded([tgt[i] + [EOS] for i in indices], PAD), "index": torch.tensor(indices),
            "alignment": padded([aligned[i] + [-1] for i in indices], -1)}


@pytest.mark.parametrize("replicas", [1, 2])
def test_batches_equal_the_host_loaders_every_epoch(replicas):
    generator = torch.Generator().manual_seed(0)
    src = [torch.randint(3, 60, (int(n),), generator=generator).tolist() for n in torch.randint(1, 20, (300,))]
    tgt = [torch.randint(3, 60, (int(n),), generator=generator).tolist() for n in torch.randint(1, 20, (300,))]
    # Each target token's source position (-1: none), as the training split's alignments
    aligned = [[int(torch.randint(-1, len(s), (), generator=generator)) for _ in t] for s, t in zip(src, tgt)]
    rows = [i for i in range(300) if i % 5]  # a kept subset, as training keeps pairs under the length limit
    lengths = [max(len(src[i]), len(tgt[i]) + 1) for i in rows]
    for rank in range(replicas):
        sampler = TokenBucketBatchSampler(lengths, 96, shuffle=True, seed=3, num_replicas=replicas, rank=rank)
        on_device = DeviceBatches(Collator(src, tgt, PAD, BOS, EOS, aligned, device="cpu"), rows, sampler)
        assert on_device.sampler is sampler and len(on_device) == len(sampler)
        for epoch in (0, 1):
            _set_sampler_epoch(on_device, epoch)  # what Lightning calls at every epoch
            expected = [padded_by_hand(src, tgt, aligned, [rows[p] for p in batch]) for batch in sampler]
            got = list(on_device)
            assert len(got) == len(expected)
            for a, b in zip(got, expected):
                assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
                assert ((a["alignment"] >= 0) <= (a["tgt_out"] != PAD)).all()  # none at padding
        # And the epochs differ: a new shuffle each epoch.
        _set_sampler_epoch(on_device, 0)
        first = [b["index"].tolist() for b in on_device]
        _set_sampler_epoch(on_device, 1)
        assert [b["index"].tolist() for b in on_device] != first


def test_lightning_reshuffles_the_host_loader_too(tmp_path):
    """Lightning calls ``set_epoch`` on ``batch_sampler.sampler``: the bucket sampler answers as itself."""
    datamodule = small_datamodule(tmp_path)
    loader = datamodule.train_dataloader()
    _set_sampler_epoch(loader, 4)
    assert loader.batch_sampler.epoch == 4


def test_the_data_module_cuts_batches_on_the_device_when_asked(tmp_path):
    datamodule = small_datamodule(tmp_path)
    host = {split: list(getattr(datamodule, f"{split}_dataloader")()) for split in ("train", "val", "test")}
    datamodule.hparams.on_device = True  # the GPU path, on the CPU device
    for split, expected in host.items():
        loader = getattr(datamodule, f"{split}_dataloader")()
        assert isinstance(loader, DeviceBatches)
        got = list(loader)
        assert len(got) == len(expected)
        assert all(torch.equal(a[k], b[k]) for a, b in zip(got, expected) for k in a)
    with pytest.raises(ValueError, match="on_device=.yes. must be true or false"):
        type(datamodule)(corpus_path="x", on_device="yes")
