"""Figures about the data pipeline: split sizes, BPE lengths, padding, build time cold and warm.

    python scripts/data_stats.py            # builds into a fresh temporary cache, then again warm
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

from data.datamodule import TranslationDataModule
from data.sampler import TokenBucketBatchSampler, token_batches


def padding_share(batches: list[list[int]], src_ids: list[list[int]], tgt_ids: list[list[int]]) -> float:
    """Share of the padded src + tgt tensors that is padding (the target gains BOS / EOS)."""
    padded = real = 0
    for batch in batches:
        src, tgt = [len(src_ids[i]) for i in batch], [len(tgt_ids[i]) + 1 for i in batch]
        padded += len(batch) * (max(src) + max(tgt))
        real += sum(src) + sum(tgt)
    return 1 - real / padded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        timings = []
        for _ in range(2):  # cold, then warm
            start = time.perf_counter()
            datamodule = TranslationDataModule(cache_dir=cache)
            datamodule.setup()
            timings.append(time.perf_counter() - start)
        print(f"build: cold {timings[0]:.1f} s, warm {timings[1]:.1f} s")
        print(f"parse: {datamodule.report.summary()}")
        for name, split in datamodule.splits.items():
            pairs = sum(len(r) for r in split["refs"])
            print(f"{name:10s} {len(split):6d} rows, {pairs:6d} pairs")
        train = datamodule.splits["train"]
        for column, label in (("src_ids", f"{datamodule.pair.names[0]} (+EOS)"), ("tgt_ids", datamodule.pair.names[1])):
            lengths = sorted(len(ids) for ids in train[column])
            p99 = lengths[int(0.99 * (len(lengths) - 1))]
            print(f"BPE tokens per sentence, {label}: mean {statistics.mean(lengths):.1f}, p99 {p99}, max {lengths[-1]}")
        lengths = [max(len(s), len(t) + 1) for s, t in zip(train["src_ids"], train["tgt_ids"])]
        bucketed = list(TokenBucketBatchSampler(lengths, 4096, seed=0))
        order = list(range(len(lengths)))
        random.Random(0).shuffle(order)
        shuffled = token_batches(lengths, 4096, order)
        src_ids, tgt_ids = train["src_ids"], train["tgt_ids"]
        print(f"padding in 4096-token batches: bucketed {padding_share(bucketed, src_ids, tgt_ids):.1%} "
              f"({len(bucketed)} batches), random {padding_share(shuffled, src_ids, tgt_ids):.1%} ({len(shuffled)} batches)")


if __name__ == "__main__":
    main()
