"""train.py and configs/: presets instantiate, a smoke run end to end, determinism, refusals in one line, one writer
per run folder, the GPU recipe on the CPU. (Stopping and resuming: test_interrupt.py, test_checkpoint_io.py.)"""

import csv
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hydra.errors import ConfigCompositionException, InstantiationException
from hydra.utils import instantiate

from data.datamodule import TranslationDataModule
from helpers import (ROOT, compose_train, explorer_data, final_step, limit_file_size, run_train,
                     train_in_process)
from model.search import SearchConfig
from model.transformer import Seq2SeqTransformer
from runtime.machine import Machine, decide_machine, settle_settings
from runtime.non_finite import NonFiniteLossError
from model.training.translation_module import TranslationModule
from train import SettingsError

CONFIGS = ROOT / "configs"
PRESETS = [[], ["experiment=smoke"], ["experiment=gpu"], ["experiment=cpu"], ["experiment=finetune"], ["trainer=ddp"],
           ["logger=csv"], ["logger=tensorboard"], ["data=opus_books"]]


@pytest.mark.parametrize("overrides", PRESETS, ids=lambda o: " ".join(o) or "default")
def test_every_preset_instantiates(overrides, tmp_path):
    cfg = compose_train(*overrides, f"paths.output_dir={tmp_path}", "model.src_vocab_size=300",
                        "model.tgt_vocab_size=300", "model.pad_id=0")
    settle_settings(cfg, decide_machine(cfg))  # train.py's one decision of the machine: no "auto" left
    model = instantiate(cfg.model)
    assert isinstance(model, Seq2SeqTransformer) and model.src_embed.token.embedding_dim == cfg.model.d_model
    module = instantiate(cfg.module, model=model, optimizer=instantiate(cfg.optim.optimizer), _convert_="all")
    assert isinstance(module, TranslationModule)
    assert module.search_config == SearchConfig(**{k: v for k, v in cfg.module.search.items() if k != "_target_"})
    assert module.schedule(cfg.module.schedule.warmup_steps, 0.0) == 1.0  # peak learning rate after warm-up
    assert isinstance(module.optimizer_factory(model.parameters()), torch.optim.AdamW)  # fused too (the GPU preset)
    assert isinstance(instantiate(cfg.data), TranslationDataModule)
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c is not None]
    for name, node in cfg.logger.items():
        if name == "tensorboard" and not (importlib.util.find_spec("tensorboard") or importlib.util.find_spec("tensorboardX")):
            with pytest.raises(InstantiationException, match="tensorboard"):  # the optional extra is missing
                instantiate(node)
        else:
            assert instantiate(node).save_dir == str(tmp_path)
    # No GPU here: a GPU preset is built for the CPU, everything else as configured.
    accelerator = "cpu" if cfg.trainer.accelerator == "gpu" else cfg.trainer.accelerator
    trainer = instantiate(cfg.trainer, accelerator=accelerator, devices=1, logger=False, callbacks=callbacks,
                          precision=cfg.runtime.precision)  # what the run machinery hands the Trainer
    assert trainer.precision == cfg.runtime.precision
    if overrides == ["trainer=ddp"]:
        assert type(trainer.strategy).__name__ == "DDPStrategy"


class Payload:
    """What a malicious checkpoint carries: code that runs when it is unpickled."""

    def __reduce__(self):
        return (print, ("this must never run",))


@pytest.fixture(scope="module")
def refusals(tmp_path_factory, data_cache) -> dict[str, tuple[str, str, int]]:
    """``python train.py`` with what it must refuse in one line, launched together (each is mostly its imports):
    name -> (stdout, stderr, exit code)."""
    folder = tmp_path_factory.mktemp("refusals")  # one refused after Hydra composes, one before (the rest: in-process)
    commands = {"bad_value": ["model.num_heads=3"], "typo": ["experiment=nope"]}
    launched = {name: subprocess.Popen([sys.executable, "train.py", *args, f"hydra.run.dir={folder / name}"], cwd=ROOT,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for name, args in commands.items()}
    return {name: (*process.communicate(timeout=300), process.returncode) for name, process in launched.items()}


def test_unknown_key_fails_with_hydras_error(refusals):
    with pytest.raises(ConfigCompositionException, match="optim.lerning_rate"):  # Hydra's own error, as on
        compose_train("optim.lerning_rate=0.1")  # the command line
    # A value that cannot work: one line from train.py, no traceback (Hydra's log goes to the run folder); a
    # typo in a config group's option: one line naming the choices, before anything starts.
    _, stderr, code = refusals["bad_value"]
    assert code == 1 and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("train.py: bad settings: model.d_model=256 is not")
    _, stderr, code = refusals["typo"]
    assert code == 1 and stderr == ("train.py: experiment=nope: no such option in "
                                    "configs/experiment/ (choices: ablation, cpu, finetune, gpu, smoke)\n")
    from runtime.config_checks import check_command_line

    with pytest.raises(SettingsError, match=r"^bad settings: trainer.max_time is not Lightning's here: set runtime."
                                            r"max_time$"):  # a key of ours under trainer:, as Lightning would have it
        check_command_line(["trainer.max_time=1"], CONFIGS)
    check_command_line(["-m", "experiment=smoke,ablation", "+ablation=post_norm", "hydra.run.dir=x", "seed=3"], CONFIGS)
    for args in (["-m", "experiment=smoke,nope"], ["+ablation=no_heads"], ["logger=wandb,csvv"]):
        with pytest.raises(SettingsError, match=r"no such option in configs/\w+/ \(choices: "):
            check_command_line(args, CONFIGS)
    with pytest.raises(ConfigCompositionException, match="experiment/nope"):  # in-process too (not optional)
        compose_train("experiment=nope")


def read_losses(run_dir: Path) -> list[float]:
    with open(next(run_dir.glob("csv/version_*/metrics.csv"))) as f:
        return [float(row["train/loss"]) for row in csv.DictReader(f) if row.get("train/loss")]


def read_metric_names(run_dir: Path) -> set[str]:
    with open(next(run_dir.glob("csv/version_*/metrics.csv"))) as f:
        return {name for row in csv.DictReader(f) for name, value in row.items() if value}


def test_smoke_run_end_to_end(smoke_run):
    losses = read_losses(smoke_run)
    assert losses[-1] < losses[0]
    for name in ("tokenizer.json", "config.yaml", "checkpoints/last.ckpt", "checkpoints/best.ckpt",
                 "checkpoints/final.ckpt", "test_metrics.json", "test_translations.tsv"):
        assert (smoke_run / name).is_file(), name
    assert final_step(smoke_run) == 60
    # PNGs in the run folder, from the last validation too.
    steps = sorted(p.name for p in (smoke_run / "attention").iterdir())
    assert steps[-1] == "step_000060"
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert (smoke_run / "attention" / steps[-1] / f"{kind}_sentence0.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The offline wandb run holds the attention panels and the translation table.
    media = next(smoke_run.glob("wandb/offline-run-*/files/media"))
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert list((media / "images" / "attention" / kind).glob("sentence_0_*.png"))
    assert list((media / "table" / "val").glob("translations_*.table.json"))
    # The explorer: in the run folder with every validation so far, and as an HTML panel in wandb.
    assert [s["label"] for s in explorer_data(smoke_run / "attention" / "explorer.html")["steps"]] == [
        "step 30", "step 60"]
    panels = sorted((media / "html" / "attention").glob("explorer_*.html"))
    assert len(panels) == 2 and "attention-data" in panels[-1].read_text(encoding="utf-8")
    # Attention statistics per kind, layer and head, at every validation, in metrics.csv.
    with open(next(smoke_run.glob("csv/version_*/metrics.csv"))) as f:
        rows = [r for r in csv.DictReader(f) if r.get("attention_cross/diagonal")]
    assert len(rows) == 2 and 0 <= float(rows[-1]["attention_cross/monotonic_L1H2"]) <= 1
    # Where the time went: every phase and the steps' tokens.
    split = json.loads((smoke_run / "time_split.json").read_text())
    metrics = json.loads((smoke_run / "test_metrics.json").read_text())
    assert "time_split" not in metrics  # one writer per file; the confidence marks, set by validation, scored on test:
    assert (smoke_run / "confidence.json").is_file() and metrics["confidence"]["sentences"] == metrics["sentences"]
    assert json.loads((smoke_run / "confidence.json").read_text())["combination"] is not None  # beam 2: an agreement
    assert metrics["confidence"]["ranked_by"] == "combined"
    alignment = metrics["alignment"]  # the cross-attention against both gold sets, every layer and head
    assert alignment["everyday"]["pairs"] == alignment["europarl"]["pairs"] == 100
    assert len(alignment["everyday"]["by_head"]) == 1 and "test/aer_everyday_best_head" in read_metric_names(smoke_run)
    assert split["steps"] == 60 and split["tokens"] > 0
    assert all(split["seconds"][phase] > 0 for phase in ("data", "steps", "validation", "views", "checkpoints", "test"))
    assert sum(split["seconds"].values()) == pytest.approx(split["wall_s"], abs=0.1)
    assert b"time_split" in next(smoke_run.glob("wandb/offline-run-*/run-*.wandb")).read_bytes()  # wandb's summary


def test_the_run_prints_its_machine_its_progress_and_its_time_split_and_nothing_of_other_peoples(smoke_run):
    console = (smoke_run.parent / "console.txt").read_text()
    lines = [line.split(" - ", 1)[-1] for line in console.splitlines()]  # without the log's time stamps
    assert lines[0].startswith("machine: ") and sum(line.startswith("time split: ") for line in lines) == 1
    # Written to a file: one line per validation, no progress bar's carriage returns.
    assert [line.split(":")[0] for line in lines if line.startswith("step ")] == ["step 30", "step 60"]
    assert "\r" not in console and "it/s" not in console
    for noise in ("litlogger", "deprecat", "weights_only", "wandb:", "GPU available", "Seed set", "Warning"):
        assert noise.lower() not in console.lower(), noise


def test_same_seed_same_losses(smoke_run, tmp_path, data_cache):
    # The GPU's path on the CPU: batches cut on the device, checkpoints written in the background.
    train_in_process(tmp_path / "again", data_cache, "logger=csv", "test=false", "data.on_device=true",
                     "runtime.asynchronous_checkpoints=true")
    assert read_losses(tmp_path / "again") == read_losses(smoke_run)
    assert final_step(tmp_path / "again") == 60


def test_one_run_folder_one_writer(tmp_path, data_cache):
    from runtime.settings import held_run_folder

    run_dir = tmp_path / "shared"
    process = run_train(run_dir, data_cache, "logger=csv", "test=false", "trainer.max_steps=5000",
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    owner = run_dir / ".train.pid"
    deadline = time.time() + 300
    while not owner.is_file() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    try:
        with pytest.raises(SettingsError, match=rf"{run_dir} is in use by another train.py \(process {process.pid}\)"):
            train_in_process(run_dir, data_cache, "logger=csv", "test=false")
    finally:
        os.kill(process.pid, signal.SIGKILL)  # killed: its lock must not outlive it
        process.wait()
    with held_run_folder(run_dir):  # the killed run's lock went with it
        assert owner.read_text() == str(os.getpid())
    assert not owner.exists()


@pytest.mark.parametrize("override, message", [
    ("model.num_heads=3", "not divisible by model.num_heads=3"),
    ("data.max_sentence_len=500", "exceeds model.max_len=128"),
    ("module.schedule.warmup_steps=0", "warmup_steps=0 must be"),
    ("model.d_model=abc", "model.d_model='abc' must be"),
    ("data.max_tokens=100", "cannot hold one pair"),
    ("module.schedule.decay=exponential", "decay='exponential' must be one of linear, cosine, inverse_sqrt"),
    ("data.vocab_size=10", "vocab_size=10 is below 260"),
    ("data.limit_pairs=0", "limit_pairs=0 must be a whole number >= 1"),
    ("data.max_eval_pairs=0.5", "max_eval_pairs=0.5 must be a whole number >= 1, or null"),
    ("data.learn_pairs=0", "learn_pairs=0 must be a whole number >= 1, or null"),
    ("runtime.max_time=abc", "max_time='abc' must be DD:HH:MM:SS"),
    ("data.val_fraction=0.9", "val_fraction=0.9 must be a share"),
    ("module.val_bleu_every=0", "module.val_bleu_every=0 must be a whole number >= 1"),
    ("module.search.beam_size=100", r"module.search.beam_size must be between 1 \(greedy\) and \d+, got 100"),
    ("runtime.precision=fp8", "runtime.precision='fp8' must be one of auto, bf16-mixed"),
    ("runtime.last_every_n_steps=2.5", "runtime.last_every_n_steps=2.5 must be a whole number above 0, or null"),
    ("+trainer.max_time=00:00:01:00", "trainer.max_time is not Lightning's here: set runtime.max_time"),
    ("data.target_lang=Dutch", "data.target_lang='Dutch' must be a language code such as en, es, nl"),
    ("data.source_lang=es", "data.source_lang and data.target_lang are both 'es'"),
    ("data.corpus_format=xlsx", "data.corpus_format='xlsx' must be one of auto, tatoeba, tsv, csv, tmx, aligned, hub"),
    ("data.corpus_format=hub", "data.corpus_format=hub goes with data.hub_path"),
    ("data.columns=en", "data.columns='en' must list the file's columns in order"),
    ("data.encoding=klingon", "data.encoding='klingon' is not an encoding Python knows"),
    ("data.replay=-1", "data.replay=-1 must be a number >= 0"),
    ("data.replay=1", r"data.replay=1 mixes in a starting run's corpus: give the run, init_from=\.\.\.$"),
    ("averaging=ema callbacks.weight_averaging.decay=1.5", "weight_averaging.decay=1.5 must be between 0 and 1"),
])
def test_bad_settings_are_refused_before_any_work(tmp_path, override, message):
    with pytest.raises(SettingsError, match=message):
        train_in_process(tmp_path / "run", tmp_path / "cache", *override.split())
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()  # nothing built or written


def test_a_checkpoint_that_needs_unpickling_is_refused_in_one_line(tmp_path, data_cache, capfd):
    evil = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "global_step": 1, "payload": Payload()}, evil)
    with pytest.raises(SettingsError, match=r"ckpt_path: .*evil\.ckpt: not a loadable checkpoint"):
        train_in_process(tmp_path / "run", data_cache, f"ckpt_path={evil}")
    assert not (tmp_path / "run").exists()  # refused before any work
    assert "this must never run" not in "".join(capfd.readouterr())  # never unpickled


def test_a_corpus_that_cannot_be_used_is_one_line(tmp_path, data_cache):
    from data.corpus import CorpusError, CorpusNotFoundError  # train.py says either in one line (stops_in_one_line)

    (tmp_path / "spa-eng.zip").write_bytes(b"PK\x03\x04" + b"\x00" * 100)  # a truncated zip
    with pytest.raises(CorpusError, match="not a readable zip"):
        train_in_process(tmp_path / "run", tmp_path / "cache", f"data.corpus_path={tmp_path / 'spa-eng.zip'}")

    with pytest.raises(CorpusNotFoundError, match="missing.zip does not exist"):
        train_in_process(tmp_path / "run2", tmp_path / "cache", f"data.corpus_path={tmp_path / 'missing.zip'}")


def test_a_corpus_nowhere_to_be_found_is_said_in_its_own_words():
    from data.corpus import CorpusNotFoundError
    from data.cache import DataCacheError
    from train import stops_in_one_line

    with pytest.raises(SystemExit, match=r"^train.py: Tatoeba corpus not found and not downloadable\. Put"):
        with stops_in_one_line():  # an OSError made of a message alone has no strerror: not "train.py: None"
            raise CorpusNotFoundError("Tatoeba corpus not found and not downloadable. Put spa-eng.zip at ...")
    with pytest.raises(SystemExit, match=r"^train.py: /cache: cannot build the data cache$"):
        with stops_in_one_line():  # errno and words: the words alone
            raise DataCacheError(28, "/cache: cannot build the data cache")


def test_a_full_disk_during_training_is_one_error_naming_the_checkpoint(smoke_run, tmp_path, data_cache):
    # The OS refuses to grow a file past 300 kB: the run's small files are written (the data cache is built,
    # by the smoke run), its first checkpoint (weights and optimizer state, ~480 kB) is not.
    run = tmp_path / "full"
    process = run_train(run, data_cache, "logger=csv", "test=false", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True, preexec_fn=limit_file_size(300_000))
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"train.py: {run / 'checkpoints'}/") and last.endswith(
        "cannot write the checkpoint (File too large); the previous one is intact"), last
    assert not list((run / "checkpoints").glob(".*partial"))  # nothing half-written left behind


def test_a_run_folder_keeps_its_settings(smoke_run, tmp_path, data_cache):
    run = tmp_path / "run"
    shutil.copytree(smoke_run, run, ignore=shutil.ignore_patterns("wandb", "final.ckpt"))  # as if interrupted
    before = {name: (run / name).read_bytes() for name in ("config.yaml", "tokenizer.json")}
    for override, named in (("data.vocab_size=600", "data.vocab_size"), ("model.d_model=64", "model.d_model"),
                            ("seed=7", "seed"), ("averaging=ema", "averaging"),
                            ("data.source_lang=es data.target_lang=en", "data.source_lang / data.target_lang")):
        with pytest.raises(SettingsError, match=f"holds a run with other settings.*{named}"):
            train_in_process(run, data_cache, *override.split())
    from omegaconf import OmegaConf

    from runtime.settings import check_run_folder

    shutil.copytree(run, tmp_path / "now")  # this code's tokenizer; the run's, as if from before truecase.json:
    (run / "truecase.json").unlink()
    saved = OmegaConf.load(run / "config.yaml")
    with pytest.raises(SettingsError, match=r"the tokenizer \(tokenizer.json: this run's reads lines as they are"):
        check_run_folder(saved, run, dict(saved.model), tmp_path / "now")
    assert {name: (run / name).read_bytes() for name in before} == before  # nothing overwritten


def test_a_non_finite_loss_stops_the_run_without_final_weights(tmp_path, data_cache, monkeypatch):
    import model.training.translation_module as translation_module

    real, calls = translation_module.label_smoothed_loss, []

    def poisoned(logits, target, smoothing):  # the 25th training batch makes the loss NaN
        loss, nll, accuracy = real(logits, target, smoothing)
        calls.append(1)
        return (loss * float("nan") if len(calls) == 25 else loss), nll, accuracy

    monkeypatch.setattr(translation_module, "label_smoothed_loss", poisoned)
    run = tmp_path / "nan"
    with pytest.raises(NonFiniteLossError, match=r"nan at step 24.*no final.ckpt.*last good checkpoint: .*last.ckpt"):
        train_in_process(run, data_cache, "logger=csv", "test=false")
    assert not (run / "checkpoints" / "final.ckpt").exists()
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 20


def test_the_gpu_recipe_sets_only_what_differs_and_the_machine_decides_the_rest():
    cfg = compose_train("experiment=gpu")
    assert cfg.callbacks.early_stopping is None and cfg.runtime.last_every_n_steps is None
    assert cfg.runtime.last_every_minutes == 2  # last.ckpt by time, decided at logging steps
    assert (cfg.model.dropout, cfg.model.attention_dropout, cfg.model.activation_dropout) == (0.3, 0.1, 0.1)
    auto = compose_train()  # what a GPU run gets follows from the machine, in one place: never from the preset
    assert [cfg.data.on_device, cfg.runtime.asynchronous_checkpoints, cfg.trainer.accelerator, cfg.runtime.precision] \
        == [auto.data.on_device, auto.runtime.asynchronous_checkpoints, auto.trainer.accelerator, "auto"]
    settle_settings(cfg, Machine(gpu=True, devices=1, name="test GPU", recipe="gpu"))
    assert cfg.data.on_device is True and cfg.runtime.asynchronous_checkpoints is True and cfg.trainer.accelerator == "gpu"
    assert compose_train("experiment=cpu") == compose_train()  # the CPU recipe is the composed default


def test_the_training_search_is_search_configs_defaults_and_an_override_reaches_the_module():
    # SearchConfig holds the defaults (hydra_plugins/structured_configs makes the config node from it).
    import dataclasses

    search = compose_train().module.search
    assert {k: v for k, v in search.items() if k != "_target_"} == dataclasses.asdict(SearchConfig())
    cfg = compose_train("module.search.beam_size=8", "module.search.length_penalty=0.0", "model.src_vocab_size=50",
                        "model.tgt_vocab_size=50", "model.pad_id=0")
    module = instantiate(cfg.module, model=instantiate(cfg.model), optimizer=instantiate(cfg.optim.optimizer),
                         _convert_="all")
    assert module.search_config == dataclasses.replace(SearchConfig(), beam_size=8, length_penalty=0.0)
