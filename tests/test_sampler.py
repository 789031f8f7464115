"""data/sampler.py: token-budget batches, each example once per epoch, disjoint DDP shards."""

import random

import pytest

from data.sampler import IdLists, TokenBucketBatchSampler, pad_batch, token_batches


def lengths(n=1000, seed=0):
    rng = random.Random(seed)
    return [rng.randint(1, 60) for _ in range(n)]


def test_each_example_once_per_epoch_within_budget():
    lens = lengths()
    sampler = TokenBucketBatchSampler(lens, max_tokens=256, seed=1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(len(lens)))
        assert all(len(b) * max(lens[i] for i in b) <= 256 for b in batches)
        assert len(batches) == len(sampler)
    sampler.set_epoch(0)
    first = list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != first  # reshuffled each epoch
    sampler.set_epoch(0)
    assert list(sampler) == first  # and seeded


@pytest.mark.parametrize("replicas", [2, 3])
def test_ddp_ranks_get_disjoint_shards_covering_the_data(replicas):
    lens = lengths(997)
    shards = [list(TokenBucketBatchSampler(lens, 300, seed=5, num_replicas=replicas, rank=r)) for r in range(replicas)]
    assert len({len(s) for s in shards}) == 1  # same number of steps on every rank
    seen = [i for shard in shards for batch in shard for i in batch]
    assert sorted(seen) == list(range(len(lens)))  # disjoint and covering


def test_bucketing_keeps_padding_low():
    lens = lengths(5000)
    budget = sum(len(b) * max(lens[i] for i in b) for b in TokenBucketBatchSampler(lens, 1024, seed=0))
    assert 1 - sum(lens) / budget <= 0.10


def greedy_batches(lens, max_tokens, order):
    """A batch grows by the next index while its padded size fits: one Python step per index."""
    batches, batch, longest = [], [], 0
    for index in order:
        if batch and (len(batch) + 1) * max(longest, lens[index]) > max_tokens:
            batches.append(batch)
            batch, longest = [], 0
        batch.append(index)
        longest = max(longest, lens[index])
    return batches + [batch] * bool(batch)


@pytest.mark.parametrize("max_tokens", [60, 256, 4096])
def test_the_batches_are_cut_as_one_greedy_pass_would(max_tokens):
    lens = lengths(3000, seed=max_tokens)
    order = sorted(range(len(lens)), key=lambda i: (lens[i], random.random()))
    assert [b.tolist() for b in token_batches(lens, max_tokens, order)] == greedy_batches(lens, max_tokens, order)


def test_id_lists_from_arrow_and_from_python_agree():
    import pyarrow as pa

    lists = [[5, 6, 7], [], [8], [9, 10]]
    column = pa.chunked_array([pa.array(lists[:2], pa.list_(pa.int32())), pa.array(lists[2:], pa.list_(pa.int32()))])
    for ids in (IdLists.of(lists), IdLists.of_arrow(column), IdLists.of_arrow(column.combine_chunks().slice(1))):
        expected = lists[-len(ids):]
        assert ids.lists() == expected and ids.lengths.tolist() == list(map(len, expected))
    assert (IdLists.of(lists[:2]) + IdLists.of(lists[2:])).lists() == lists


def test_too_long_example_is_a_clear_error():
    with pytest.raises(ValueError, match="more than max_tokens"):
        list(TokenBucketBatchSampler([5, 500], max_tokens=100))


def test_pad_batch():
    assert pad_batch([[5, 6, 7], [8]], 0).tolist() == [[5, 6, 7], [8, 0, 0]]


def test_every_rank_gets_the_same_number_of_batches_even_with_few_examples():
    for n, replicas in ((3, 2), (1, 4), (5, 3), (7, 4)):
        per_rank = [list(TokenBucketBatchSampler([5] * n, 100, shuffle=False, num_replicas=replicas, rank=r))
                    for r in range(replicas)]
        assert len({len(batches) for batches in per_rank}) == 1, (n, replicas)  # else DDP hangs
        assert sorted({i for batches in per_rank for b in batches for i in b}) == list(range(n))
