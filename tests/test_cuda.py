"""On a GPU: the fused kernels, bf16 autocast, search and a training run agree with the CPU.

Marked ``cuda``: the default test command leaves them out (``tests/conftest.py``; CI has no
GPU), ``scripts/gpu_check.sh`` runs them with ``-m cuda`` on a machine that has one, where a
missing GPU is a failure, not a skip.
"""

import copy
import json

import pytest
import torch

from helpers import run_train, tiny_model
from model.attention import MultiHeadAttention
from runtime.machine import choose_precision
from model.search import SearchConfig, search
from model.transformer import Seq2SeqTransformer

pytestmark = pytest.mark.cuda
CUDA = torch.device("cuda")


def test_a_gpu_is_there():
    assert torch.cuda.is_available(), "the cuda tests need a GPU (run them with scripts/gpu_check.sh)"
    assert choose_precision(True) == "bf16-mixed"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_attention_kernels_match_the_explicit_math(dtype):
    torch.manual_seed(0)
    attention = MultiHeadAttention(64, 4).to(CUDA, dtype)
    x, memory = torch.randn(3, 7, 64, device=CUDA, dtype=dtype), torch.randn(3, 9, 64, device=CUDA, dtype=dtype)
    padding = torch.zeros(3, 9, dtype=torch.bool, device=CUDA)
    padding[1, 6:] = True
    tolerance = dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    for args, kwargs in [((x, x, x), dict(causal=True)), ((x, memory, memory), dict(key_padding_mask=padding))]:
        fused, _ = attention(*args, **kwargs)
        explicit, _ = attention(*args, **kwargs, need_weights=True)
        torch.testing.assert_close(fused, explicit, **tolerance)


def model_pair() -> tuple[Seq2SeqTransformer, Seq2SeqTransformer]:
    """The same small model on the CPU and on the GPU (evaluation mode, no dropout)."""
    model = tiny_model(50, d_model=64, d_ff=128, max_len=256)
    return model, copy.deepcopy(model).to(CUDA)


def test_bf16_autocast_training_step_matches_fp32_on_the_cpu():
    cpu, gpu = model_pair()
    src, tgt = torch.randint(3, 50, (4, 9)), torch.randint(3, 50, (4, 8))
    src[2, 6:] = 0
    expected = cpu(src, tgt)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = gpu(src.to(CUDA), tgt.to(CUDA))
    torch.testing.assert_close(logits.float().cpu(), expected, atol=0.1, rtol=0.05)
    logits.float().logsumexp(-1).mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in gpu.parameters() if p.grad is not None)


def test_greedy_and_beam_search_on_the_gpu_equal_the_cpu():
    cpu, gpu = model_pair()
    src = torch.randint(3, 50, (5, 8))
    src[1, 5:] = 0
    for config in (SearchConfig(beam_size=1), SearchConfig(beam_size=3)):
        on_gpu, on_cpu = search(gpu, src.to(CUDA), 1, 2, config), search(cpu, src, 1, 2, config)
        assert [o.ids for o in on_gpu] == [o.ids for o in on_cpu]
        torch.testing.assert_close([o.log_prob for o in on_gpu], [o.log_prob for o in on_cpu], atol=1e-3, rtol=1e-3)


@pytest.mark.slow  # scripts/gpu_check.sh's full run covers it; the quick tier leaves it out
def test_batches_cut_on_the_gpu_equal_the_hosts():
    from data.device_batches import DeviceBatches
    from data.sampler import Collator, TokenBucketBatchSampler

    generator = torch.Generator().manual_seed(0)
    src = [torch.randint(3, 60, (int(n),), generator=generator).tolist() for n in torch.randint(1, 20, (200,))]
    tgt = [torch.randint(3, 60, (int(n),), generator=generator).tolist() for n in torch.randint(1, 20, (200,))]
    aligned = [[int(torch.randint(-1, len(s), (), generator=generator)) for _ in t] for s, t in zip(src, tgt)]
    rows = [i for i in range(200) if i % 3]
    sampler = TokenBucketBatchSampler([max(len(src[i]), len(tgt[i]) + 1) for i in rows], 96, shuffle=True, seed=1)
    on_gpu = DeviceBatches(Collator(src, tgt, 0, 1, 2, aligned, device=CUDA), rows, sampler)
    host = Collator(src, tgt, 0, 1, 2, aligned)
    for batch, positions in zip(on_gpu, sampler):
        expected = host([rows[p] for p in positions])
        assert all(batch[k].device.type == "cuda" and torch.equal(batch[k].cpu(), expected[k]) for k in expected)


def test_smoke_training_run_on_the_gpu(tmp_path, data_cache):
    # logger=csv: the GPU path is what is checked here, not wandb (scripts/gpu_check.sh does the same)
    run_train(tmp_path / "run", data_cache, "trainer.accelerator=gpu", "runtime.precision=auto", "logger=csv")
    assert "bf16-mixed" in (tmp_path / "run" / "config.yaml").read_text()
    assert json.loads((tmp_path / "run" / "test_metrics.json").read_text())["sentences"] > 0


def test_no_training_step_synchronizes_outside_logging_steps(tmp_path):
    """torch's sync debug mode makes any host-device synchronisation an error, in every training step that
    is not a logging step: batches cut on the GPU, the loss and gradient guard, fused AdamW, the metrics on
    the device, the time budget and the signal check."""
    import lightning as L

    from helpers import small_datamodule
    from model.training.schedule import budget_schedule
    from model.training.trainer_state import is_logging_step
    from model.training.translation_module import TranslationModule
    from runtime.non_finite import NonFiniteGuard
    from runtime.stop_and_clock import StopAndClock
    from runtime.timing import RunClock, TimeSplit

    datamodule = small_datamodule(tmp_path)
    datamodule.hparams.on_device = True  # what train.py settles on a GPU
    guard = NonFiniteGuard()  # the run machinery as train.py attaches it
    stop = StopAndClock("00:01:00:00", last_every_minutes=60, guard=guard)
    module = TranslationModule(tiny_model(datamodule.src_vocab_size, d_model=64, d_ff=128).train(),
                               lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True), budget_schedule(warmup_steps=3),
                               val_bleu_samples=4, guard=guard, time_budget=stop.budget)
    strict_steps = []

    class Strict(L.Callback):  # first: from the step's start ...
        def on_train_batch_start(self, trainer, *args) -> None:
            if not is_logging_step(trainer):
                strict_steps.append(trainer.global_step)
                torch.cuda.set_sync_debug_mode("error")

    class Lenient(L.Callback):  # ... last: to the end of its callbacks
        def on_train_batch_end(self, *args) -> None:
            torch.cuda.set_sync_debug_mode("default")

    trainer = L.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=12, limit_val_batches=0,
                        log_every_n_steps=5, gradient_clip_val=1.0, logger=False, enable_checkpointing=False,
                        enable_model_summary=False, default_root_dir=str(tmp_path),
                        callbacks=[Strict(), TimeSplit(RunClock("cuda")), stop, Lenient()])
    try:
        trainer.fit(module, datamodule=datamodule)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert trainer.global_step == 12 and len(strict_steps) == 10


@pytest.mark.slow
def test_the_gpu_run_says_where_its_time_went(tmp_path, data_cache):
    run_train(tmp_path / "run", data_cache, "trainer.accelerator=gpu", "runtime.precision=auto", "logger=csv")
    split = json.loads((tmp_path / "run" / "time_split.json").read_text())
    assert split["steps"] == 60 and split["tokens_per_s_steps"] > 0 and split["seconds"]["steps"] > 0
