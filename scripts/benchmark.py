"""Speed of the from-scratch Transformer against torch.nn.Transformer, as ratios from ONE run.

    python scripts/benchmark.py                 # ~3 minutes on a 2-core CPU
    python scripts/benchmark.py --quick         # fewer repetitions (a smoke check)

Prints:
  1. training step (forward + backward + AdamW), d_model 256, 4 heads, 3+3 layers, d_ff 1024,
     vocab 8000, ~4096-token batches: tokens/s of Seq2SeqTransformer vs a torch.nn.Transformer
     model of the same shape, fp32, and with bf16 autocast where this CPU runs bf16 faster;
  2. achieved GFLOP/s of the training step against a large matmul measured in the same run;
  3. greedy decoding of 2000 sentences: with the KV cache vs re-running the decoder over the
     whole prefix each step, plus torch.nn.Transformer's usual uncached greedy loop.
The two sides of each ratio are timed interleaved (A, B, A, B, ...) and the median is
taken, because these machines are noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from model.embeddings import sinusoidal_table
from model.precision import choose_precision
from model.search import greedy_decode
from model.transformer import Seq2SeqTransformer

PAD, BOS, EOS = 0, 1, 2
SHAPE = dict(d_model=256, num_heads=4, num_encoder_layers=3, num_decoder_layers=3, d_ff=1024)
VOCAB = 8000


class TorchTransformer(nn.Module):
    """The plain recipe: nn.Embedding + sinusoidal positions + nn.Transformer + output Linear."""

    def __init__(self) -> None:
        super().__init__()
        d = SHAPE["d_model"]
        self.src_embed, self.tgt_embed = nn.Embedding(VOCAB, d, padding_idx=PAD), nn.Embedding(VOCAB, d, padding_idx=PAD)
        self.register_buffer("positions", sinusoidal_table(256, d), persistent=False)
        self.transformer = nn.Transformer(d, SHAPE["num_heads"], SHAPE["num_encoder_layers"],
                                          SHAPE["num_decoder_layers"], SHAPE["d_ff"], dropout=0.1, batch_first=True)
        self.output = nn.Linear(d, VOCAB)

    def embed(self, embedding: nn.Embedding, tokens: torch.Tensor) -> torch.Tensor:
        return embedding(tokens) * math.sqrt(embedding.embedding_dim) + self.positions[: tokens.size(1)]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1))
        out = self.transformer(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt_in), tgt_mask=causal,
                               src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt_in == PAD,
                               memory_key_padding_mask=src == PAD, tgt_is_causal=True)
        return self.output(out)

    @torch.no_grad()
    def greedy(self, src: torch.Tensor, max_steps: int) -> torch.Tensor:
        memory = self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src == PAD)
        tokens = torch.full((src.size(0), 1), BOS, dtype=torch.long)
        for _ in range(max_steps):
            causal = nn.Transformer.generate_square_subsequent_mask(tokens.size(1))
            out = self.transformer.decoder(self.embed(self.tgt_embed, tokens), memory, tgt_mask=causal,
                                           memory_key_padding_mask=src == PAD)
            tokens = torch.cat([tokens, self.output(out[:, -1]).argmax(-1, keepdim=True)], dim=1)
        return tokens


def tatoeba_like_batch(n_sentences: int, seed: int = 0, spread: float = 4.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Source/target ids with Tatoeba-like BPE lengths (around 10-12 tokens), right-padded.

    ``spread``: standard deviation of the lengths; a small one mimics one length bucket.
    """
    g = torch.Generator().manual_seed(seed)
    lengths = (torch.randn(n_sentences, generator=g) * spread + 11).round().clamp(3, 30).long()
    src = torch.full((n_sentences, int(lengths.max())), PAD)
    tgt = torch.full((n_sentences, int(lengths.max()) + 2), PAD)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, VOCAB, (n,), generator=g)
        src[i, n - 1] = EOS
        m = n + 1
        tgt[i, :m] = torch.randint(4, VOCAB, (m,), generator=g)
        tgt[i, 0], tgt[i, m - 1] = BOS, EOS
    return src, tgt


def training_step(model, optimizer, src, tgt, autocast: bool) -> None:
    """One step as each recipe does it: ours projects only real target tokens onto the vocabulary."""
    context = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    with context:
        if isinstance(model, Seq2SeqTransformer):
            real = tgt_out != PAD
            logits, target = model(src, tgt_in, output_mask=real), tgt_out[real]  # (N, vocab), (N,)
        else:
            logits, target = model(src, tgt_in).flatten(0, 1), tgt_out.flatten()  # (B·T, vocab)
    loss = F.cross_entropy(logits.float(), target, ignore_index=PAD, label_smoothing=0.1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def interleaved_times(runs: dict[str, callable], repeats: int, warmup: int = 1) -> dict[str, float]:
    """Median seconds per call of each runner, timed in turns so that noise hits all of them."""
    for run in runs.values():
        for _ in range(warmup):
            run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def matmul_gflops(dtype: torch.dtype, n: int = 2048, repeats: int = 5) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    seconds = interleaved_times({"mm": lambda: a @ b}, repeats)["mm"]
    return 2 * n**3 / seconds / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and sentences")
    parser.add_argument("--sentences", type=int, default=2000, help="sentences for the decoding benchmark")
    args = parser.parse_args()
    repeats = 2 if args.quick else 7
    n_sentences = 200 if args.quick else args.sentences
    torch.manual_seed(0)
    warnings.filterwarnings("ignore", category=UserWarning)  # torch.nn's mask / nested-tensor notices
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU")

    # 1. training throughput ---------------------------------------------------------------
    src, tgt = tatoeba_like_batch(320, spread=0.5)  # one length bucket: 320 x 12 ≈ 4096 tokens per side
    tokens = int((src != PAD).sum() + (tgt[:, 1:] != PAD).sum())
    ours = Seq2SeqTransformer(VOCAB, VOCAB, **SHAPE, share_embeddings=True, tie_output=True).train()
    ref = TorchTransformer().train()
    opt_ours, opt_ref = torch.optim.AdamW(ours.parameters(), 1e-4), torch.optim.AdamW(ref.parameters(), 1e-4)
    # bf16 only where this CPU runs it faster (the probe of trainer.precision: auto): emulated
    # bf16 is ~10x slower than fp32, and timing it would take most of the run for nothing.
    bf16 = choose_precision("cpu") == "bf16-mixed"
    runners = {"torch.nn fp32": lambda: training_step(ref, opt_ref, src, tgt, False),
               "ours fp32": lambda: training_step(ours, opt_ours, src, tgt, False)}
    if bf16:
        runners |= {"ours bf16": lambda: training_step(ours, opt_ours, src, tgt, True),
                    "torch.nn bf16": lambda: training_step(ref, opt_ref, src, tgt, True)}
    t = interleaved_times(runners, repeats, warmup=2)
    print(f"\n1. training step, batch {tuple(src.shape)} src / {tuple(tgt.shape)} tgt, {tokens} real tokens")
    for name, seconds in t.items():
        print(f"   {name:14s} {seconds * 1000:7.0f} ms/step  {tokens / seconds:8.0f} tokens/s")
    print(f"   ratio ours fp32 / torch.nn fp32 = {t['torch.nn fp32'] / t['ours fp32']:.2f}x   (target >= 1.0x)")
    if bf16:
        print(f"   ratio ours bf16 / torch.nn fp32 = {t['torch.nn fp32'] / t['ours bf16']:.2f}x   (target >= 1.5x)")
    else:
        print("   bf16 skipped: this CPU runs bf16 matmuls slower than fp32 (precision auto picks fp32)")

    # 2. GFLOP/s against the machine's matmul ceiling (same run) ---------------------------
    with FlopCounterMode(display=False) as counter:
        training_step(ours, opt_ours, src, tgt, False)
    step_flops = counter.get_total_flops()
    print(f"\n2. {step_flops / 1e9:.0f} GFLOP per training step (matmuls, forward + backward)")
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))[: 2 if bf16 else 1]:
        ceiling, achieved = matmul_gflops(dtype), step_flops / t[f"ours {name}"] / 1e9
        print(f"   {name}: {achieved:6.0f} GFLOP/s achieved vs {ceiling:6.0f} GFLOP/s 2048² matmul = {achieved / ceiling:.0%}")

    # 3. decoding ----------------------------------------------------------------------------
    ours.eval()
    ref.eval()
    batches = [tatoeba_like_batch(100, seed=s)[0] for s in range(n_sentences // 100)]
    max_steps = 25  # no EOS id (-1): every sentence runs the full length, in both implementations

    def decode_ours(use_cache: bool):
        for batch in batches:
            greedy_decode(ours, batch, BOS, -1, max_len_a=0.0, max_len_b=max_steps, use_cache=use_cache)

    def decode_ref():
        for batch in batches:
            ref.greedy(batch, max_steps)

    d = interleaved_times({"cached": lambda: decode_ours(True), "uncached": lambda: decode_ours(False),
                           "torch.nn uncached": decode_ref}, 1 if args.quick else 2, warmup=0)
    n = len(batches) * 100
    print(f"\n3. greedy decoding of {n} sentences, batches of 100, {max_steps} steps each (fp32)")
    for name, seconds in d.items():
        print(f"   {name:18s} {seconds:6.1f} s  {n / seconds:7.0f} sentences/s")
    print(f"   ratio cached / uncached (ours)  = {d['uncached'] / d['cached']:.2f}x   (target >= 3x)")
    print(f"   ratio cached / torch.nn greedy  = {d['torch.nn uncached'] / d['cached']:.2f}x")


if __name__ == "__main__":
    main()
