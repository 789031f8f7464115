"""The run machinery behind one door: what makes a training run safe to stop and cheap to watch on any machine.

``train.py`` enters ``attach(cfg)`` once and builds its run inside it::

    with runtime.attach(cfg) as run:   # the machine decided, the settings checked, the run folder held
        ...                            # data (timed: run.phase("data")), model, module(**run.module_parts)
        trainer = instantiate(cfg.trainer, **run.trainer_parts(callbacks))
        run.fit(trainer, module, datamodule)   # resumes, stops on a signal, writes final.ckpt
    # on the way out: where the time went (time_split.json), the run folder let go

Inside: the machine and precision decided once (``machine.py``, ``precision.py``); settings refused in one
line (``settings.py``); ``runtime.max_time`` and the clock the schedule reads (``budget.py``); ``last.ckpt``
by one writer, atomic and asynchronous writes, the resume point (``checkpoint_io.py``); Ctrl-C and SIGTERM
(``interrupt.py``); the non-finite guard (``non_finite.py``); the time split and MFU (``timing.py``); the
progress bar that never waits for the device (``progress_bar.py``, configured with the callbacks). Its
settings are the ``runtime`` config group (``configs/runtime/default.yaml``). Nothing below the entry points
imports it; it hands the LightningModule its two collaborators, the guard and the time budget.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict

from data.atomic_file import write_text_atomically
from data.corpus import CorpusError, CorpusNotFoundError
from data.datamodule import DataCacheError
from model.views.callback import wandb_loggers
from runtime.budget import TrainingBudget
from runtime.checkpoint_io import AtomicCheckpointIO, CheckpointWriteError, LastCheckpoint, resume_point
from runtime.interrupt import GracefulStop, TrainingInterrupted
from runtime.machine import Machine, decide_machine, settle_settings, with_recipe
from runtime.non_finite import NonFiniteGuard, NonFiniteLossError
from runtime.precision import peak_flops
from runtime.settings import (SettingsError, check_config, check_group_choices, check_run_folder, first_rank,
                              given_checkpoint, interrupted_run_checkpoint, lock_run_folder)
from runtime.timing import RunClock, TimeSplit

log = logging.getLogger("train")


class Run:
    """One training run's machinery: its clock, callbacks, checkpoint writer and guard, built from ``cfg``."""

    def __init__(self, cfg: DictConfig, machine: Machine, run_dir: Path, ckpt_path: str | None) -> None:
        self.cfg, self.machine, self.run_dir, self.ckpt_path = cfg, machine, run_dir, ckpt_path
        settings = cfg.runtime
        self.clock = RunClock(machine.device_type)  # where the time goes: data, steps, validation, views, ...
        self.time_split = TimeSplit(self.clock)  # first of the callbacks: a step's time starts before any other's
        self.budget = TrainingBudget(settings.max_time)
        self.last = LastCheckpoint(settings.last_every_n_steps, settings.last_every_minutes, self.budget.clock)
        # The module's collaborators: the guard clips and skips non-finite updates; the time budget is the
        # clock its schedule reads (the budget's, not ``self.clock``, which times the phases).
        self.stopper = GracefulStop(self.last)  # Ctrl-C / SIGTERM: save last.ckpt at the step, then stop
        self.checkpoint_io = AtomicCheckpointIO(asynchronous=settings.asynchronous_checkpoints, clock=self.clock)
        self.module_parts = {"guard": NonFiniteGuard(), "time_budget": self.budget.clock}
        self.trainer: L.Trainer | None = None

    def phase(self, name: str):
        """Time a part of the run as ``name`` (``runtime.timing.PHASES``)."""
        return self.clock.phase(name)

    def check_folder(self, model_config: dict, tokenizer_folder: Path) -> None:
        """Refuse to continue this run folder with settings that change its tokenizer or model."""
        check_run_folder(self.cfg, self.run_dir, model_config, tokenizer_folder)

    def trainer_parts(self, callbacks: list[L.Callback]) -> dict[str, Any]:
        """What the Trainer takes from the machinery, around the configured ``callbacks``: a callback with a
        ``clock`` attribute left None (the attention views) times its work on the run's clock."""
        for callback in callbacks:
            if getattr(callback, "clock", False) is None:
                callback.clock = self.clock
        return {"callbacks": [self.time_split, *callbacks, self.budget, self.last, self.stopper],
                "plugins": [self.checkpoint_io], "precision": self.cfg.runtime.precision}

    def fit(self, trainer: L.Trainer, module: L.LightningModule, datamodule: L.LightningDataModule) -> None:
        """Train (resuming where the run folder or ``ckpt_path`` says), then write ``final.ckpt``: the weights
        as training left them (a time limit rarely stops on a validation step)."""
        self.trainer = trainer
        # Said in one line instead: the token-bucket sampler reshuffles per epoch, from its seed.
        warnings.filterwarnings("ignore", message=".*your dataloader is not resumable.*")
        try:
            trainer.fit(module, datamodule=datamodule, ckpt_path=self.ckpt_path, weights_only=True)
        except NonFiniteLossError as error:
            good = resume_point(self.run_dir)
            raise NonFiniteLossError(f"{error}: training stopped, no final.ckpt written; last good checkpoint: "
                                     f"{good or 'none'} (a lower optim.optimizer.lr may help)") from None
        self.stopper.raise_if_interrupted(trainer.global_step)  # a signal: last.ckpt saved, no final weights
        with self.clock.phase("checkpoints"):
            trainer.save_checkpoint(self.run_dir / "checkpoints" / "final.ckpt", weights_only=True)
            self.checkpoint_io.teardown()

    def report(self) -> None:
        """Where the run's time went: one log line, ``time_split.json`` and wandb's summary (first rank)."""
        if self.trainer is None or not self.trainer.is_global_zero:
            return
        peak = peak_flops(self.cfg.runtime.precision, self.machine.device_type)  # what MFU is measured against
        report = self.clock.split(self.time_split.work(), peak)
        log.info(report.line())
        split = report.as_dict()
        try:
            write_text_atomically(self.run_dir / "time_split.json", json.dumps(split, indent=2))
        except OSError as error:  # a full disk: the line above says it all, and the run's own error goes on
            log.warning("time split not written to %s: %s", self.run_dir, error.strerror or error)
        for logger in wandb_loggers(self.trainer.loggers):
            logger.experiment.summary.update({"time_split": split})


@contextmanager
def attach(cfg: DictConfig) -> Iterator[Run]:
    """The machine decided (and its answer written into ``cfg``'s ``auto`` settings), the settings checked
    (``SettingsError`` before anything is built), a given checkpoint checked to load safely, the run folder
    held; on the way out, the time split reported (also when the run fails) and the folder let go."""
    machine = decide_machine(cfg, composed_recipe())
    log.info(machine.line())
    settle_settings(cfg, machine)
    check_config(cfg)
    ckpt_path = given_checkpoint(cfg)  # before any work: a given checkpoint must load safely
    run_dir = Path(cfg.paths.output_dir)
    lock = lock_run_folder(run_dir)
    try:
        run = Run(cfg, machine, run_dir, ckpt_path or interrupted_run_checkpoint(run_dir))
        if (group := sweep_group()) and cfg.get("logger") and "wandb" in cfg.logger:
            with open_dict(cfg):
                cfg.logger.wandb.group = group  # the runs of one sweep overlay in one wandb group
        try:
            yield run
        finally:
            run.report()
            finish_wandb_run()
    finally:
        if lock is not None:
            (run_dir / ".train.pid").unlink(missing_ok=True)
            lock.release()


def composed_recipe() -> str | None:
    """The ``experiment=`` preset Hydra composed for this run (None when composed outside Hydra's command line)."""
    return HydraConfig.get().runtime.choices.get("experiment") if HydraConfig.initialized() else None


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


def command_line(argv: Sequence[str], configs: Path) -> list[str]:
    """``train.py``'s arguments, a config group's unknown option or a key of ours under ``trainer:`` refused in
    one line (before Hydra composes), with the recipe for this machine (``experiment=gpu`` where CUDA is found,
    unless the command says)."""
    try:
        check_group_choices(list(argv), configs)
        for key in (arg.partition("=")[0].lstrip("+~") for arg in argv):
            if key in ("trainer.max_time", "trainer.precision"):
                raise SettingsError(f"{key} is the run machinery's, not Lightning's: set runtime.{key[8:]}")
    except SettingsError as error:
        sys.exit(f"train.py: {error}")
    return with_recipe(argv)


@contextmanager
def stops_in_one_line(search: bool = False) -> Iterator[None]:
    """What stops a run, said in one ``train.py:`` line with the shell's exit code; in a ``search`` a
    non-finite loss is raised on (the sweeper records the trial as failed and goes on)."""
    try:
        yield
    except NonFiniteLossError as error:
        if search:
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
