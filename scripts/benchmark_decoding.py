"""Decoding speed from ONE run, each ratio's sides timed in turns: ours with and without the KV cache
against torch.nn's usual uncached loop; on a trained run, scores and alignments on against off.

    python scripts/benchmark_decoding.py                                 # section 5 of scripts/benchmark.py
    python scripts/benchmark_decoding.py --run outputs/my_run --lines test.en   # scores, alignments on against off

Random weights and no EOS: every sentence runs the full length in both implementations. Also the
benchmarks' shared pieces: the default config, Tatoeba-like batches, timing in turns.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from model.search import SearchConfig, greedy_decode
from runtime.machine import machine_name
from model.transformer import Seq2SeqTransformer

PAD, BOS, EOS = 0, 1, 2
ROOT = Path(__file__).resolve().parent.parent
SHAPE_KEYS = ("d_model", "num_heads", "num_encoder_layers", "num_decoder_layers", "d_ff")


def default_config(overrides: list[str] | None = None):
    """configs/train.yaml as `python train.py [OVERRIDES]` composes it. Hydra registers the config nodes made
    from code when it finds ``hydra_plugins`` on the path, as it does beside train.py; from scripts/ it may not."""
    import hydra_plugins.structured_configs  # noqa: F401 — registers module/search/default

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose("train", overrides=overrides or [])


def tatoeba_like_batch(n_sentences: int, vocab: int, seed: int = 0, spread: float = 4.0):
    """Source/target ids with Tatoeba-like BPE lengths (around 10-12 tokens), right-padded.

    ``spread``: standard deviation of the lengths; a small one mimics one length bucket.
    """
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


def scores_section(run: Path, lines_file: Path, repeats: int) -> None:
    """6. translate.py's pipeline on a trained run: lines/s with confidence scores (the search's own
    log-probabilities and the beam's other hypotheses, then each sentence's agreement, flags and mark) against
    without, and with each line's word alignment (``alignments=true``) against without, timed in turns."""
    from model.inference.translator import Translator

    translator = Translator.load(run, device="cpu")
    lines = lines_file.read_text(encoding="utf-8").splitlines()
    options = {"scores off": {"scores": False}, "scores on": {}, "alignments on": {"alignments": True}}
    runs = {name: (lambda kwargs=kwargs: translator.translate(lines, **kwargs)) for name, kwargs in options.items()}
    times = interleaved_times(runs, repeats, warmup=1)
    search = translator.settings.search
    print(f"\n6. {run}: {len(lines)} lines of {lines_file}, beam {search.beam_size}, translate.py's pipeline")
    print("   " + ", ".join(f"{name} {len(lines) / seconds:6.1f} lines/s" for name, seconds in times.items()))
    print(f"   time ratio scores on / off = {times['scores on'] / times['scores off']:.3f}x, "
          f"alignments on / off (scores on) = {times['alignments on'] / times['scores on']:.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=2000, help="sentences to decode")
    parser.add_argument("--run", type=Path, help="a trained run: its speed with scores and alignments (section 6)")
    parser.add_argument("--lines", type=Path, help="with --run: the lines to translate (scripts/export_split.py)")
    args = parser.parse_args()
    if args.run:
        print(f"{machine_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
        return scores_section(args.run, args.lines, 3)
    torch.manual_seed(0)
    cfg = default_config()
    print(f"{machine_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    from torch_peer import TorchTransformer  # scripts/torch_peer.py, beside this file

    shape, vocab = {k: cfg.model[k] for k in SHAPE_KEYS}, cfg.data.vocab_size
    model = Seq2SeqTransformer(vocab, vocab, **shape, share_embeddings=True).eval()
    decoding_section(model, TorchTransformer(vocab, **shape).eval(), vocab, args.sentences, 2)


if __name__ == "__main__":
    main()
