"""Where the training step's time goes, and training and decoding speed against the alternatives — from ONE run.

    python scripts/benchmark.py                 # sections 1-3 and 5: ~6 minutes on a 2-core CPU
    python scripts/benchmark.py --pipeline      # + 4: 430 steps of the real `python train.py` (~3 more minutes)
    python scripts/benchmark.py --quick         # fewer repetitions (a smoke check); --decoding: section 5 alone

Each ratio's sides are timed in turns (A, B, A, B, ...; medians: these machines are noisy). ``configs/``' defaults
against the ``scripts/torch_peer.py`` fp32 peer of the same shape; a trained run's decoding speed is
``scripts/benchmark_run.py``'s. Each section says what it is.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from datetime import date
from pathlib import Path

import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from gpu_check_report import read_metrics  # scripts/gpu_check_report.py, beside this file
from model.search import SearchConfig, greedy_decode
from model.training.translation_module import label_smoothed_loss
from model.transformer import Seq2SeqTransformer
from runtime.machine import choose_precision, machine_name, matmul_gflops
from torch_peer import BOS, EOS, PAD, TorchTransformer  # scripts/torch_peer.py, beside this file

ROOT = Path(__file__).resolve().parent.parent
SHAPE_KEYS = ("d_model", "num_heads", "num_encoder_layers", "num_decoder_layers", "d_ff")

# Kinds of op, by the name of the aten op that owns the time (self time: children excluded).
OP_KINDS = [
    ("matrix math (mm, bmm, addmm)", ("aten::mm", "aten::bmm", "aten::addmm", "aten::_weight_int")),
    ("fused attention kernel", ("scaled_dot_product", "flash_attention")),
    ("dropout masks", ("bernoulli", "native_dropout")),
    ("log-softmax / loss", ("log_softmax", "nll_loss", "gather", "argmax", "scatter")),
    ("casts and copies", ("aten::copy_", "aten::_to_copy", "aten::to")),
    ("layer norm", ("layer_norm",)),
    ("optimizer (AdamW)", ("adamw", "_foreach", "lerp", "addcdiv", "addcmul")),
]


def header() -> str:
    """The machine a benchmark ran on, its threads, torch and the date: every benchmark's first line."""
    return f"{machine_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}, {date.today()}"


def default_config(overrides: list[str] | None = None):
    """configs/train.yaml as `python train.py [OVERRIDES]` composes it. Hydra registers the config nodes made
    from code when it finds ``hydra_plugins`` on the path, as it does beside train.py; from scripts/ it may not."""
    __import__("hydra_plugins.structured_configs")  # registers module/search/default

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose("train", overrides=overrides or [])


def tatoeba_like_batch(n_sentences: int, vocab: int, seed: int = 0, spread: float = 4.0):
    """Source/target ids with Tatoeba-like BPE lengths (around 10-12 tokens), right-padded; ``spread``: the lengths'
    standard deviation (a small one mimics one length bucket)."""
    g = torch.Generator().manual_seed(seed)
    lengths = (torch.randn(n_sentences, generator=g) * spread + 11).round().clamp(3, 30).long()
    src = torch.full((n_sentences, int(lengths.max())), PAD)
    tgt = torch.full((n_sentences, int(lengths.max()) + 2), PAD)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, vocab, (n,), generator=g)
        src[i, n - 1] = EOS
        m = n + 1
        tgt[i, :m] = torch.randint(4, vocab, (m,), generator=g)
        tgt[i, 0], tgt[i, m - 1] = BOS, EOS
    return src, tgt


def real_tokens(batch) -> int:
    """A batch's real tokens: its sources' and its targets' after BOS."""
    src, tgt = batch
    return int((src != PAD).sum() + (tgt[:, 1:] != PAD).sum())


def interleaved_times(runs: dict, repeats: int, warmup: int = 1) -> dict[str, float]:
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


def training_step(model, optimizer, src, tgt, bf16: bool) -> None:
    """One update as each recipe does it: ours projects only real target tokens onto the vocabulary."""
    context = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    with context:
        if isinstance(model, Seq2SeqTransformer):
            real = tgt_out != PAD
            loss = label_smoothed_loss(model(src, tgt_in, output_mask=real), tgt_out[real], 0.1)[0]
        else:
            logits = model(src, tgt_in).flatten(0, 1)  # (B·T, vocab)
            loss = F.cross_entropy(logits.float(), tgt_out.flatten(), ignore_index=PAD, label_smoothing=0.1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # trainer.gradient_clip_val
    optimizer.step()


def profile_by_kind(step, steps: int = 3) -> tuple[list[tuple[str, float]], float]:
    """Shares of self CPU time by kind of op over ``steps`` calls; also seconds per step."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        seconds = (time.perf_counter() - start) / steps
    by_kind: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        name = event.key.lower()
        kind = next((k for k, needles in OP_KINDS if any(n.lower() in name for n in needles)), "everything else")
        by_kind[kind] += event.self_cpu_time_total
    total = sum(by_kind.values())
    order = [k for k, _ in OP_KINDS] + ["everything else"]
    return [(k, by_kind[k] / total) for k in order if k in by_kind], seconds


def pipeline_tokens_per_s(steps: int) -> tuple[float, int]:
    """Median ``train/tokens_per_s`` of `python train.py` (defaults, real batches) after step 30."""
    with tempfile.TemporaryDirectory() as run_dir:
        command = [sys.executable, "train.py", "logger=csv", "test=false", "runtime.max_time=null",
                   f"trainer.max_steps={steps + 30}", "+trainer.limit_val_batches=0", f"hydra.run.dir={run_dir}"]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"benchmark.py: {' '.join(command)} failed:\n{result.stderr[-2000:]}")
        rows = read_metrics(Path(run_dir))
    rates = [r["train/tokens_per_s"] for r in rows if "train/tokens_per_s" in r and r["step"] >= 30]
    return statistics.median(rates), len(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and sentences")
    parser.add_argument("--pipeline", action="store_true", help="also time `python train.py` itself")
    parser.add_argument("--pipeline-steps", type=int, default=400, help="its optimizer steps (after 30 warm-up)")
    parser.add_argument("--sentences", type=int, default=2000, help="sentences for the decoding benchmark")
    parser.add_argument("--decoding", action="store_true", help="the decoding benchmark alone (section 5)")
    args = parser.parse_args()
    print(header())
    repeats = 2 if args.quick else 7
    warnings.filterwarnings("ignore", category=UserWarning)  # torch.nn's mask / nested-tensor notices
    torch.manual_seed(0)
    cfg = default_config()
    shape = {k: cfg.model[k] for k in SHAPE_KEYS}
    vocab, dropout = cfg.data.vocab_size, cfg.model.dropout
    fused = bool(cfg.optim.optimizer.get("fused", False))
    precision = choose_precision(False) if cfg.runtime.precision == "auto" else cfg.runtime.precision
    bf16 = precision.startswith("bf16")

    def ours(drop: float, fused_adamw: bool):
        model = Seq2SeqTransformer(vocab, vocab, **shape, dropout=drop, share_embeddings=True).train()
        return model, torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused_adamw)

    default_model, default_opt = ours(dropout, fused)
    peer = TorchTransformer(vocab, **shape, dropout=0.1).train()
    if not args.decoding:
        print(f"default: {shape}, vocab {vocab}, dropout {dropout}, AdamW fused={fused}, precision {precision}")
        # Batches of one length bucket (~12 tokens a sentence): the peer's ~4,096 tokens per side, and
        # the default token budget (data.max_tokens) that train.py fills.
        big = tatoeba_like_batch(320, vocab, spread=0.5)
        small = tatoeba_like_batch(max(cfg.data.max_tokens // 13, 1), vocab, spread=0.5)
        plain_model, plain_opt = ours(0.1, False)
        peer_opt = torch.optim.AdamW(peer.parameters(), lr=1e-4)
        # name -> (step on a batch, the batch); every step in the table is timed in turns with the others
        runners = {
            "torch.nn fp32 (peer), 4k batch": (lambda b: training_step(peer, peer_opt, *b, False), big),
            "ours, default, default batch": (lambda b: training_step(default_model, default_opt, *b, bf16), small),
            "ours, default, 4k batch": (lambda b: training_step(default_model, default_opt, *b, bf16), big),
            "previous default (dropout 0.1), 4k": (lambda b: training_step(plain_model, plain_opt, *b, False), big),
        }
        matmul_share = profile_section(runners)
        step_flops, peaks = flops_section(default_model, default_opt, small, shape, vocab)
        peer_rate = steps_section(runners, repeats, step_flops, peaks, matmul_share)
        if args.pipeline:
            pipeline_section(args.pipeline_steps, runners, peer_rate)
    n_sentences = 200 if args.quick else args.sentences
    decoding_section(default_model.eval(), peer.eval(), vocab, n_sentences, 1 if args.quick else 2)


def profile_section(runners: dict) -> float:
    """1. Where the default step's time goes, by kind of operator; returns the matmuls' share."""
    default_step, default_batch = runners["ours, default, default batch"]
    for _ in range(3):
        default_step(default_batch)
    kinds, seconds = profile_by_kind(lambda: default_step(default_batch), steps=10)
    src, tgt = default_batch
    print(f"\n1. profile of the default training step ({seconds * 1000:.0f} ms under the profiler), "
          f"batch {tuple(src.shape)} src / {tuple(tgt.shape)} tgt, {real_tokens(default_batch)} real tokens")
    for kind, share in kinds:
        print(f"   {kind:30s} {share:6.1%}")
    return dict(kinds).get(OP_KINDS[0][0], 0.0)


def flops_section(model, optimizer, batch, shape: dict, vocab: int) -> tuple[float, dict[str, float]]:
    """2. The default step's FLOPs, and matmul GFLOP/s at the model's shapes: (FLOPs, peak per precision)."""
    with FlopCounterMode(display=False) as counter:
        training_step(model, optimizer, *batch, False)
    step_flops = counter.get_total_flops()
    d, rows = shape["d_model"], batch[0].numel()
    shapes = {"d→3d (QKV)": (d, 3 * d), "d→d_ff": (d, shape["d_ff"]), "d_ff→d": (shape["d_ff"], d),
              "d→vocab": (d, vocab)}
    print(f"\n2. {step_flops / 1e9:.1f} GFLOP per default training step (matmuls, forward + backward); "
          f"matmul GFLOP/s at the model's shapes ({rows} rows):")
    peaks = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        rates = {s: matmul_gflops(dtype, rows, i, o) for s, (i, o) in shapes.items()}
        peaks[name] = max(rates.values())
        print(f"   {name}: " + ", ".join(f"{s} {r:.0f}" for s, r in rates.items()))
    return step_flops, peaks


def steps_section(runners: dict, repeats: int, step_flops: float, peaks: dict, matmul_share: float) -> float:
    """3. Every step of ``runners`` timed in turns, against the torch.nn fp32 peer; returns the peer's tokens/s."""
    t = interleaved_times({name: (lambda f=f, b=b: f(b)) for name, (f, b) in runners.items()}, repeats, warmup=1)
    rate = {name: real_tokens(runners[name][1]) / seconds for name, seconds in t.items()}
    achieved = step_flops / t["ours, default, default batch"] / 1e9
    print(f"   the default step (timed in 3.) achieves {achieved:.0f} GFLOP/s = {achieved / peaks['fp32']:.0%} of "
          f"the fp32 peak, {achieved / peaks['bf16']:.0%} of the bf16 peak")
    big, default_batch = runners["ours, default, 4k batch"][1], runners["ours, default, default batch"][1]
    print(f"\n3. training steps (4k batch: {real_tokens(big)} real tokens; default batch: "
          f"{real_tokens(default_batch)}), median of {repeats} interleaved")
    peer_rate = rate["torch.nn fp32 (peer), 4k batch"]
    for name, seconds in t.items():
        ratio = rate[name] / peer_rate
        print(f"   {name:36s} {seconds * 1000:7.0f} ms/step  {rate[name]:7.0f} tokens/s  {ratio:5.2f}x")
    headline = rate["ours, default, default batch"] / peer_rate
    ceiling = rate["ours, default, 4k batch"] / peer_rate / matmul_share
    print(f"   headline: ours (default) / torch.nn fp32 = {headline:.2f}x tokens/s   (same-shape ceiling if all but "
          f"the matmuls were free: {ceiling:.2f}x)")
    return peer_rate


def pipeline_section(steps: int, runners: dict, peer_rate: float) -> None:
    """4. ``python train.py`` itself (real batches), against the peer timed before and after it."""
    pipeline_rate, n = pipeline_tokens_per_s(steps)
    peer_step, peer_batch = runners["torch.nn fp32 (peer), 4k batch"]
    after = real_tokens(peer_batch) / interleaved_times({"peer": lambda: peer_step(peer_batch)}, 3, warmup=0)["peer"]
    both = statistics.mean([peer_rate, after])
    print(f"\n4. python train.py (defaults, real batches): median {pipeline_rate:.0f} tokens/s over {n} logged "
          f"steps; torch.nn fp32 peer {both:.0f} tokens/s (mean of before and after) = {pipeline_rate / both:.2f}x")


def decoding_section(model, peer, vocab: int, n_sentences: int, repeats: int) -> None:
    """5. Greedy decoding, ours with and without the cache, against torch.nn's uncached greedy."""
    batches = [tatoeba_like_batch(100, vocab, seed=s)[0] for s in range(n_sentences // 100)]
    max_steps = 25  # no EOS id (-1): every sentence runs the full length, in both implementations

    def decode_ours(use_cache: bool):
        for batch in batches:
            greedy_decode(model, batch, BOS, -1, SearchConfig(max_len_a=0.0, max_len_b=max_steps), use_cache)

    def decode_peer():
        for batch in batches:
            peer.greedy(batch, max_steps)

    dec = interleaved_times({"cached": lambda: decode_ours(True), "uncached": lambda: decode_ours(False),
                             "torch.nn uncached": decode_peer}, repeats, warmup=0)
    n = len(batches) * 100
    print(f"\n5. greedy decoding of {n} sentences, batches of 100, {max_steps} steps each (fp32)")
    for name, s in dec.items():
        print(f"   {name:18s} {s:6.1f} s  {n / s:7.0f} sentences/s")
    print(f"   ratio cached / uncached (ours)  = {dec['uncached'] / dec['cached']:.2f}x")
    print(f"   ratio cached / torch.nn greedy  = {dec['torch.nn uncached'] / dec['cached']:.2f}x")


if __name__ == "__main__":
    main()
