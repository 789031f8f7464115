"""Train the English→Spanish Transformer: Hydra composes the config, Lightning trains.

Common runs:

    python train.py                                  # the default: the GPU recipe where CUDA is found, else the CPU's
    python train.py experiment=cpu                   # the recipe for a 2-core CPU, ~30 min (the default without CUDA)
    python train.py experiment=gpu                   # one GPU, 10 minutes: base-size model, bf16, batches on the GPU
    python train.py experiment=smoke                 # a minute: tiny model, data slice (what the tests run)
    python train.py trainer=ddp                      # every GPU of the node, Lightning DDP
    python train.py trainer=ddp trainer.accelerator=cpu trainer.devices=2 experiment=smoke   # DDP on a CPU
    python train.py logger=csv trainer.max_time=00:00:05:00 model.d_model=128
    python train.py hydra.run.dir=outputs/my_run     # a named run folder; run it again to resume it
    python train.py ckpt_path=outputs/x/checkpoints/last.ckpt   # resume from a given checkpoint

The run folder (``outputs/<date_time>`` unless ``hydra.run.dir`` says otherwise) gets the
resolved ``config.yaml``, ``tokenizer.json``, ``checkpoints/{best,last}.ckpt``, metrics
(``csv/``, ``wandb/``, ``test_metrics.json``), the attention maps (``attention/step_*/``,
``attention/explorer.html``) and ``time_split.json``: where the run's time went (also one line
in the log). Everything ``translate.py`` needs.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import hydra
import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from data.atomic_file import write_text_atomically
from data.corpus import CorpusError, CorpusNotFoundError
from data.datamodule import DataCacheError
from data.tokenizer import tokenizer_fingerprint
from model.training.budget import TrainingBudget
from model.training.checkpoint_io import AtomicCheckpointIO, CheckpointWriteError, resume_point
from model.training.interrupt import GracefulStop, TrainingInterrupted
from model.training.machine import Machine, decide_machine, settle_settings, with_recipe
from model.training.non_finite import NonFiniteLossError
from model.training.precision import peak_flops
from model.training.settings import (SettingsError, check_config, check_group_choices, check_run_folder, first_rank,
                                     given_checkpoint, interrupted_run_checkpoint, lock_run_folder)
from model.training.timing import RunClock, TimeSplit, TimeSplitReport
from model.views.callback import wandb_loggers

log = logging.getLogger("train")


def train(cfg: DictConfig) -> dict[str, float]:
    """Build data, model, module, loggers and trainer from a composed config; train, then test.

    Everything lands in ``cfg.paths.output_dir``. Returns the final metrics (validation and,
    with ``cfg.test``, test). Tests call this directly; ``main`` is the command-line wrapper.
    The machine is decided once, here, and its answer written into ``cfg``'s ``auto`` settings.
    Bad settings raise ``SettingsError`` before anything is built; a non-finite loss stops
    training with ``NonFiniteLossError`` and writes no ``final.ckpt``.
    """
    machine = decide_machine(cfg, composed_recipe())
    log.info(machine.line())
    settle_settings(cfg, machine)
    check_config(cfg)
    ckpt_path = given_checkpoint(cfg)  # before any work: a given checkpoint must load safely
    run_dir = Path(cfg.paths.output_dir)
    lock = lock_run_folder(run_dir)
    try:
        return _train(cfg, machine, run_dir, ckpt_path or interrupted_run_checkpoint(run_dir))
    finally:
        if lock is not None:
            (run_dir / ".train.pid").unlink(missing_ok=True)
            lock.release()


@dataclass
class Run:
    """What ``build_run`` makes of the settings: everything ``fit_and_test`` needs."""

    datamodule: L.LightningDataModule
    module: L.LightningModule
    trainer: L.Trainer
    loggers: list
    time_split: TimeSplit
    stopper: GracefulStop
    checkpoint_io: AtomicCheckpointIO


def build_run(cfg: DictConfig, machine: Machine, run_dir: Path, clock: RunClock) -> Run:
    """The data (built or read from the cache), the model and module, loggers, callbacks and trainer."""
    group = sweep_group()
    if group and cfg.get("logger") and "wandb" in cfg.logger:
        with open_dict(cfg):
            cfg.logger.wandb.group = group  # the runs of one sweep overlay in one wandb group
    L.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.data)
    with clock.phase("data"):
        datamodule.setup()  # builds (or reads from the cache) splits, tokenizer and token ids
    with open_dict(cfg):  # vocabulary and special ids flow from the data into the model
        cfg.model.src_vocab_size = datamodule.src_vocab_size
        cfg.model.tgt_vocab_size = datamodule.tgt_vocab_size
        cfg.model.pad_id = datamodule.special_ids["pad_id"]
    # Kept in the checkpoint (plain values, no _target_) so translate.py can rebuild the model.
    model_config = {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k != "_target_"}
    check_run_folder(cfg, run_dir, model_config, datamodule.tokenizer_folder)
    run_dir.mkdir(parents=True, exist_ok=True)
    model = instantiate(cfg.model)
    datamodule.tokenizer.save(run_dir)
    module = instantiate(cfg.module, model=model, optimizer=instantiate(cfg.optim.optimizer),
                         model_config=model_config, tokenizer_sha256=tokenizer_fingerprint(run_dir), _convert_="all")
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    loggers = [instantiate(c) for c in cfg.logger.values() if c is not None] if cfg.get("logger") else []
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
    # A preset switches a callback off with null (experiment=gpu: no early stopping). The attention views
    # time their own work on the run's clock.
    callbacks = [instantiate(c, **({"clock": clock} if name == "attention_views" else {}))
                 for name, c in (cfg.get("callbacks") or {}).items() if c is not None]
    time_split = TimeSplit(clock)  # first of the callbacks: a step's time starts before any other hook's
    # trainer.max_time and timed last.ckpt writes, decided at logging steps (Lightning's ask every step).
    budget = TrainingBudget(cfg.trainer.get("max_time"), cfg.checkpoints.get("last_every_minutes"))
    stopper = GracefulStop()  # Ctrl-C / SIGTERM: save last.ckpt at the step, then stop
    checkpoint_io = AtomicCheckpointIO(asynchronous=cfg.checkpoints.asynchronous, clock=clock)
    trainer = instantiate(cfg.trainer, max_time=None, logger=loggers or False, default_root_dir=str(run_dir),
                          callbacks=[time_split, *callbacks, budget, stopper], plugins=[checkpoint_io])
    log.info("model: %.1fM parameters; run folder: %s", sum(p.numel() for p in model.parameters()) / 1e6, run_dir)
    return Run(datamodule, module, trainer, loggers, time_split, stopper, checkpoint_io)


def fit_and_test(cfg: DictConfig, run: Run, run_dir: Path, ckpt_path: str | None, clock: RunClock) -> dict[str, float]:
    """Train (resuming from ``ckpt_path``), save the final weights, then score the test split."""
    trainer, module, datamodule = run.trainer, run.module, run.datamodule
    # Said in one line above instead: the token-bucket sampler reshuffles per epoch, from its seed.
    warnings.filterwarnings("ignore", message=".*your dataloader is not resumable.*")
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
    except NonFiniteLossError as error:
        good = resume_point(run_dir)
        raise NonFiniteLossError(f"{error}: training stopped, no final.ckpt written; last good checkpoint: "
                                 f"{good or 'none'} (a lower optim.optimizer.lr may help)") from None
    run.stopper.raise_if_interrupted(trainer.global_step)  # a signal: last.ckpt saved, no final weights or test
    # The weights as training left them (a time limit rarely stops on a validation step).
    with clock.phase("checkpoints"):
        trainer.save_checkpoint(run_dir / "checkpoints" / "final.ckpt", weights_only=True)
        run.checkpoint_io.teardown()
    if cfg.get("optimized_metric"):  # a search's objective: the final weights, not the last validation's
        trainer.validate(module, datamodule=datamodule, weights_only=True, verbose=False)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    if cfg.test:  # the configured search (beam) on the test split, final weights
        results = trainer.test(module, datamodule=datamodule, weights_only=True)
        metrics.update(results[0] if results else {})
    return metrics


def _train(cfg: DictConfig, machine: Machine, run_dir: Path, ckpt_path: str | None) -> dict[str, float]:
    """``train`` once its settings are checked and its run folder is held: build the run, fit and test it,
    and say where its time went (also when it fails)."""
    clock = RunClock(machine.device_type)  # where the time goes: data, steps, validation, views, ...
    run = build_run(cfg, machine, run_dir, clock)
    try:
        return fit_and_test(cfg, run, run_dir, ckpt_path, clock)
    finally:
        if run.trainer.is_global_zero:
            peak = peak_flops(cfg.trainer.precision, machine.device_type)  # what MFU is measured against
            report_time_split(clock.split(run.time_split.work(), peak), run_dir, run.loggers)
        finish_wandb_run()


def report_time_split(report: TimeSplitReport, run_dir: Path, loggers: list) -> None:
    """Where the run's time went: one log line, ``time_split.json`` and wandb's summary."""
    log.info(report.line())
    split = report.as_dict()
    try:
        write_text_atomically(run_dir / "time_split.json", json.dumps(split, indent=2))
    except OSError as error:  # a full disk: the line above says it all, and the run's own error goes on
        log.warning("time split not written to %s: %s", run_dir, error.strerror or error)
    for logger in wandb_loggers(loggers):
        logger.experiment.summary.update({"time_split": split})


def sweep_group() -> str | None:
    """Under ``python train.py -m …`` (Hydra multirun), the sweep folder: its runs' wandb group."""
    if not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    return str(hydra_cfg.sweep.dir) if hydra_cfg.mode == RunMode.MULTIRUN else None


def finish_wandb_run() -> None:
    """Close the wandb run, so that the next ``train`` in this process (a sweep, a test) starts its own."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()


def objective(cfg: DictConfig, metrics: dict[str, float]) -> float | dict[str, float]:
    """What a run returns: the metric ``optimized_metric`` names (a search's objective), else all of them."""
    name = cfg.get("optimized_metric")
    if not name:
        return metrics
    if name not in metrics:
        raise SettingsError(f"optimized_metric={name} was not logged (logged: {', '.join(sorted(metrics))})")
    return metrics[name]


def composed_recipe() -> str | None:
    """The ``experiment=`` preset Hydra composed for this run (None when composed outside Hydra's command line)."""
    return HydraConfig.get().runtime.choices.get("experiment") if HydraConfig.initialized() else None


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> float | dict[str, float]:
    try:
        return objective(cfg, train(cfg))
    except NonFiniteLossError as error:
        if cfg.get("optimized_metric"):  # a search records this trial as failed and goes on to the next
            raise
        raise SystemExit(f"train.py: {error}") from None
    except (SettingsError, CorpusError, CorpusNotFoundError) as error:
        raise SystemExit(f"train.py: {error}") from None
    except (CheckpointWriteError, DataCacheError) as error:
        raise SystemExit(f"train.py: {error.strerror}") from None
    except TrainingInterrupted as stop:
        if first_rank():  # every rank stopped and saved together: one line says it
            print(f"train.py: {stop}", file=sys.stderr)
        raise SystemExit(128 + stop.signum) from None  # 130 for Ctrl-C, 143 for SIGTERM, as shells report them
    except KeyboardInterrupt:  # before training started or after it ended: nothing of a step to save
        print("train.py: interrupted", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    try:
        check_group_choices(sys.argv[1:], Path(__file__).resolve().parent / "configs")
    except SettingsError as error:
        sys.exit(f"train.py: {error}")
    sys.argv[1:] = with_recipe(sys.argv[1:])  # experiment=gpu where CUDA is found, unless the command says
    main()
