"""The run machinery behind one door: what makes a training run safe to stop and cheap to watch on any machine.

    with runtime.attach(cfg) as run:   # init_from= read, the machine decided, the settings checked, the folder held
        trainer = instantiate(cfg.trainer, **run.trainer_parts(callbacks))   # run.clock, run.module_parts too
        run.start_from(model)   # a fine-tune's starting weights (init_from=), unless it resumes
        run.fit(trainer, module, datamodule)   # resumes, stops on a signal, writes final.ckpt
    # on the way out: where the time went (time_split.json), the run folder let go
"""

import json
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from data.atomic_file import write_text_atomically
from model.training.trainer_state import without_anonymous
from model.views.callback import wandb_loggers
from runtime.config_checks import check_config
from runtime.fine_tune import StartingRun, starting_run
from runtime.machine import decide_machine, settle_settings
from runtime.non_finite import NonFiniteGuard, NonFiniteLossError
from runtime.settings import check_run_folder, held_run_folder, refuse_finished_run, resume_from
from runtime.stop_and_clock import StopAndClock, checkpoint_writer, resume_point
from runtime.timing import RunClock, TimeSplit, split_line

log = logging.getLogger("train")


class Run:
    """One training run's machinery, built from ``cfg``: its clock, callbacks, checkpoint writer and guard."""

    def __init__(self, cfg: DictConfig, ckpt_path: str | None, device_type: str,
                 starting: StartingRun | None = None) -> None:
        self.cfg, self.ckpt_path, self.run_dir, self.starting = cfg, ckpt_path, Path(cfg.paths.output_dir), starting
        settings, guard = cfg.runtime, NonFiniteGuard()  # the guard clips, and skips non-finite updates
        self.clock = RunClock(device_type)  # where the time goes: data, steps, validation, views, ...
        self.time_split = TimeSplit(self.clock)  # first of the callbacks: a step's time starts before any other's
        self.stop = StopAndClock(settings.max_time, settings.last_every_n_steps, settings.last_every_minutes, guard)
        self.checkpoint_io = checkpoint_writer(settings.asynchronous_checkpoints, self.clock)
        self.module_parts = {"guard": guard, "time_budget": self.stop.budget}  # the clock the schedule reads
        self.trainer: L.Trainer | None = None

    def check_folder(self, model_config: dict, tokenizer_folder: Path) -> None:
        """Refuse to continue this run folder with settings that change its tokenizer or model."""
        check_run_folder(self.cfg, self.run_dir, model_config, tokenizer_folder)

    def start_from(self, model: torch.nn.Module) -> None:
        """A fine-tune's starting weights into ``model`` (``init_from=``), unless it resumes from a checkpoint."""
        if self.starting is not None:
            self.starting.load_into(model, resumes=self.ckpt_path is not None)

    def loggers(self) -> list:
        """The configured loggers; wandb's without Lightning's ``anonymous=None`` (wandb >= 0.22 deprecates it)."""
        loggers = [instantiate(c) for c in self.cfg.logger.values() if c is not None] if self.cfg.get("logger") else []
        for logger in wandb_loggers(loggers):
            without_anonymous(logger)
        return loggers

    def trainer_parts(self, callbacks: list[L.Callback]) -> dict:
        """The Trainer's callbacks, plugins and precision, around the configured ``callbacks``."""
        for callback in callbacks:
            if getattr(callback, "clock", False) is None:  # the views: timed on the run's clock
                callback.clock = self.clock
        return {"callbacks": [self.time_split, *callbacks, self.stop], "plugins": [self.checkpoint_io],
                "precision": self.cfg.runtime.precision}

    def fit(self, trainer: L.Trainer, module: L.LightningModule, datamodule: L.LightningDataModule) -> None:
        """Train (resumed where there is a resume point), then write ``final.ckpt``: the weights training left."""
        self.trainer = trainer
        # Said in one line instead: the token-bucket sampler reshuffles per epoch, from its seed.
        warnings.filterwarnings("ignore", message=".*your dataloader is not resumable.*")
        try:
            trainer.fit(module, datamodule=datamodule, ckpt_path=self.ckpt_path, weights_only=True)
        except NonFiniteLossError as error:
            raise NonFiniteLossError(f"{error}: training stopped, no final.ckpt written; last good checkpoint: "
                                     f"{resume_point(self.run_dir) or 'none'} (a lower optim.optimizer.lr may help)"
                                     ) from None
        with self.clock.phase("checkpoints"):
            trainer.save_checkpoint(self.run_dir / "checkpoints" / "final.ckpt", weights_only=True)
            trainer.strategy.checkpoint_io.teardown()  # an asynchronous write on disk before the test reads it

    def report(self) -> None:
        """Where the run's time went: one log line, ``time_split.json`` and wandb's summary (first rank)."""
        if self.trainer is None or not self.trainer.is_global_zero:
            return
        report = self.time_split.report()
        log.info(split_line(report))
        try:
            write_text_atomically(self.run_dir / "time_split.json", json.dumps(report, indent=2))
        except OSError as error:  # a full disk: the line above says it all, and the run's own error goes on
            log.warning("time split not written to %s: %s", self.run_dir, error.strerror or error)
        for logger in wandb_loggers(self.trainer.loggers):
            logger.experiment.summary.update({"time_split": report})


@contextmanager
def attach(cfg: DictConfig) -> Iterator[Run]:
    """A fine-tune's starting run read (``init_from=``: its shape, tokenizer and corpus into ``cfg``), the machine
    decided (into ``cfg``'s ``auto`` settings), the settings checked, the run folder held; on the way out (also when
    the run fails) the time split reported, the wandb run closed, the folder let go."""
    starting = starting_run(cfg)
    refuse_finished_run(Path(cfg.paths.output_dir))
    quiet_libraries(cfg)
    hydra = HydraConfig.get() if HydraConfig.initialized() else None
    machine = decide_machine(cfg, hydra.runtime.choices.get("experiment") if hydra else None)
    log.info(machine.line())
    settle_settings(cfg, machine)
    check_config(cfg)
    ckpt_path = resume_from(cfg)  # ckpt_path=, else this folder's interrupted run
    with held_run_folder(Path(cfg.paths.output_dir)):
        run = Run(cfg, ckpt_path, "cuda" if machine.gpu else "cpu", starting)
        if hydra and hydra.mode == RunMode.MULTIRUN and "wandb" in (cfg.get("logger") or {}):
            with open_dict(cfg):
                cfg.logger.wandb.group = str(hydra.sweep.dir)  # a sweep's runs overlay in one group
        try:
            yield run
        finally:
            run.report()
            if (wandb := sys.modules.get("wandb")) is not None and wandb.run is not None:
                wandb.finish()  # the next train() in this process (a sweep, a test) starts its own


def quiet_libraries(cfg: DictConfig) -> None:
    """No library deprecation, wandb offline banner or datasets bars in a file (Lightning's: configs/hydra/)."""
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    if (cfg.get("logger") or {}).get("wandb") and cfg.logger.wandb.get("mode") == "offline":
        os.environ.setdefault("WANDB_SILENT", "true")  # online, wandb's lines carry the run's address
    if not sys.stdout.isatty():
        import datasets
        datasets.disable_progress_bars()
