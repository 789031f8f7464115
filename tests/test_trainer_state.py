"""model/training/trainer_state.py: the private Lightning attribute the training glue reads, checked against
what Lightning does with it, so that a new version that changes it fails here first."""

import csv

import lightning as L
import torch

from model.training.trainer_state import fitting, is_logging_step


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
