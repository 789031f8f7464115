"""model/training/trainer_state.py: each private Lightning attribute the project reads or sets, checked against
what Lightning does with it, so that a new version that changes one fails here first."""

import csv
import inspect
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.loops.fit_loop import _FitLoop
from lightning.pytorch.loops.training_epoch_loop import _TrainingEpochLoop

from model.training.trainer_state import (fitting, is_logging_step, take_lightning_sigterm, without_anonymous)


class Logs(L.LightningModule):
    """One weight; each training step logs its step number and says whether it took it for a logging step."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))
        self.said: list[int] = []  # the steps is_logging_step called logging steps, from training_step
        self.fitting: list[bool] = []

    def training_step(self, batch, batch_idx):
        if is_logging_step(self.trainer):
            self.said.append(self.global_step)
        self.fitting.append(fitting(self.trainer))
        self.log("at_step", float(self.global_step), on_step=True, on_epoch=False)
        return (self.weight * batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(7, 1)), batch_size=1)


def test_is_logging_step_is_true_exactly_where_the_loggers_get_the_metrics(tmp_path):
    module = Logs()
    trainer = L.Trainer(max_steps=23, log_every_n_steps=5, logger=L.pytorch.loggers.CSVLogger(tmp_path, version=0),
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module)  # across epochs of 7 batches
    with open(tmp_path / "lightning_logs" / "version_0" / "metrics.csv") as f:
        logged = [int(float(row["at_step"])) for row in csv.DictReader(f) if row.get("at_step")]
    assert module.said == logged == [4, 9, 14, 19]  # every 5th update, across the epochs
    assert all(module.fitting)


def test_the_lightning_sigterm_attributes_mean_what_take_lightning_sigterm_assumes():
    # The flag behind trainer.received_sigterm, which the fit loop turns into its exit at an epoch's end ...
    assert "self._signal_connector.received_sigterm" in inspect.getsource(L.Trainer.received_sigterm.fget)
    assert "raise SIGTERMException" in inspect.getsource(_FitLoop.on_advance_end)
    # ... and the broadcast Lightning (>= 2.6) calls before every distributed step.
    assert "self._broadcast_sigterm_tensor()" in inspect.getsource(_TrainingEpochLoop.advance)
    epoch_loop = SimpleNamespace(_broadcast_sigterm_tensor=lambda: pytest.fail("broadcast"))
    trainer = SimpleNamespace(world_size=2, fit_loop=SimpleNamespace(epoch_loop=epoch_loop),
                              _signal_connector=SimpleNamespace(received_sigterm=True))
    assert take_lightning_sigterm(trainer) is True and trainer._signal_connector.received_sigterm is False
    assert epoch_loop._broadcast_sigterm_tensor() is None
    alone = SimpleNamespace(_broadcast_sigterm_tensor="untouched")  # one process: nothing is broadcast anyway
    trainer = SimpleNamespace(world_size=1, fit_loop=SimpleNamespace(epoch_loop=alone),
                              _signal_connector=SimpleNamespace(received_sigterm=False))
    assert take_lightning_sigterm(trainer) is False and alone._broadcast_sigterm_tensor == "untouched"


def test_the_wandb_logger_passes_anonymous_none_and_without_anonymous_drops_it(tmp_path):
    logger = WandbLogger(save_dir=str(tmp_path), offline=True)  # nothing starts before .experiment is read
    assert "anonymous" in logger._wandb_init and logger._wandb_init["anonymous"] is None
    without_anonymous(logger)
    assert "anonymous" not in logger._wandb_init and logger._wandb_init["dir"] == str(tmp_path)

