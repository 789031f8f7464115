"""runtime/stop_and_clock.py: the time limit, timed and signalled ``last.ckpt`` and the schedule's clock, decided
at logging steps (a stand-in trainer and clock: the same on any machine); then signals in real Lightning fits."""

import os
import signal
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pytest
import torch

import runtime.stop_and_clock as stop_and_clock
from model.training.schedule import training_progress
from runtime.non_finite import NonFiniteGuard, NonFiniteLossError
from runtime.stop_and_clock import StopAndClock, TrainingInterrupted, max_time_seconds


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now


class Strategy:
    """One rank of two: ``torch.distributed.all_reduce`` counted, with the other rank's values ``other``."""

    def __init__(self, monkeypatch, other: list[float]) -> None:
        self.root_device, self.other, self.reduces = torch.device("cpu"), other, 0
        monkeypatch.setattr(torch.distributed, "all_reduce", self.all_reduce)

    def all_reduce(self, values, op):
        assert op == torch.distributed.ReduceOp.MAX
        self.reduces += 1
        values.copy_(torch.maximum(values, torch.tensor(self.other, dtype=values.dtype)))


def trainer_at(step: int, every: int = 5, strategy: Strategy | None = None, rank: int = 0) -> SimpleNamespace:
    """What the callback asks of Lightning's trainer: the step, whether it logs, the ranks, a save."""
    saves = []
    return SimpleNamespace(global_step=step, log_every_n_steps=every, should_stop=False, default_root_dir="run",
                           _logger_connector=SimpleNamespace(should_update_logs=step % every == 0),
                           world_size=2 if strategy else 1, is_global_zero=rank == 0,
                           strategy=strategy or SimpleNamespace(root_device=torch.device("cpu")), saves=saves,
                           save_checkpoint=lambda path, weights_only=None: saves.append((step, str(path))))


def run(callback: StopAndClock, clock: Clock, seconds_per_step, steps: int, every: int = 5, start: int = 0) -> list:
    """Steps start+1..start+steps of ``seconds_per_step(step)`` each; returns (step, stopped, saves) per step."""
    callback.start_step, callback.started, callback.saved_seconds = start, clock.now, callback.seconds_before
    callback.budget.read(start, callback.seconds_before, None)  # on_train_start, without Lightning's signals
    seen = []
    for step in range(start + 1, start + steps + 1):
        clock.now += seconds_per_step(step)
        trainer = trainer_at(step, every)
        callback.on_train_batch_end(trainer, None)
        seen.append((step, trainer.should_stop, trainer.saves))
        if trainer.should_stop:
            break
    return seen


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(stop_and_clock, "time", clock)
    return clock


def test_max_time_in_seconds():
    assert max_time_seconds("00:00:30:00") == 1800.0 and max_time_seconds("01:02:03:04") == 93784.0
    assert max_time_seconds(None) is None
    with pytest.raises(ValueError, match="not DD:HH:MM:SS"):
        max_time_seconds("30:00")


def test_the_stop_is_decided_at_a_reading_for_a_step_before_the_next(clock):
    callback = StopAndClock("00:00:00:53")  # 1 s a step: 53 steps; readings every 5
    seen = run(callback, clock, lambda step: 1.0, 100)
    assert seen[-1][:2] == (53, True) and callback.stop_step == 53  # committed at the reading of step 50
    progress = [training_progress(step, budget=callback.budget) for step in (53, 27)]
    assert progress == pytest.approx([1.0, 27 / 53])


def test_one_slow_window_does_not_stop_training_early(clock):
    # A validation of 20 s in the steps 16-20: the pace is the fit's average, so the stop still comes
    # within a window of the limit, not at the first reading after the slow window.
    callback = StopAndClock("00:00:01:40")
    seen = run(callback, clock, lambda step: 21.0 if step == 18 else 1.0, 200)
    assert 78 <= seen[-1][0] <= 82 and seen[-1][1] and clock.now - 1000 <= 100 + 5


def test_timed_checkpoints_and_a_resumed_clock_without_a_spurious_save(clock):
    callback = StopAndClock(last_every_minutes=0.5)  # last.ckpt every 30 s of training, no time limit
    seen = run(callback, clock, lambda step: 4.0, 40)
    saved = [saves for _, _, saves in seen if saves]
    assert saved == [[(step, "run/checkpoints/last.ckpt")] for step in (10, 20, 30, 40)]
    assert training_progress(40, 100, callback.budget) == 0.4 and training_progress(40, budget=callback.budget) is None
    resumed = StopAndClock("00:00:05:00", last_every_minutes=0.5)
    resumed.load_state_dict(callback.state_dict())  # a resumed run goes on from 160 s of its 300
    seen = run(resumed, clock, lambda step: 4.0, 10, start=40)
    assert training_progress(40, budget=resumed.budget) == pytest.approx(160 / 300)
    # Its first reading (step 45, 20 s later) is no time for a save; the one 40 s later (step 50) is.
    assert [saves for _, _, saves in seen if saves] == [[(50, "run/checkpoints/last.ckpt")]]


def test_last_checkpoint_every_n_steps_is_written_once_per_step_also_when_asked_again(clock):
    callback = StopAndClock(last_every_n_steps=10)
    seen = run(callback, clock, lambda step: 1.0, 25)
    assert [saves for _, _, saves in seen if saves] == [[(10, "run/checkpoints/last.ckpt")],
                                                        [(20, "run/checkpoints/last.ckpt")]]
    trainer = trainer_at(20)
    assert callback.save(trainer) == Path("run/checkpoints/last.ckpt") and trainer.saves == []  # step 20 is saved


def test_under_ddp_one_all_reduce_at_a_logging_step_carries_the_clock_the_signal_and_the_loss(clock, monkeypatch):
    guard = NonFiniteGuard()
    guard.update(torch.tensor(2.0), step=3)  # finite here
    callback = StopAndClock("00:01:00:00", guard=guard)
    callback.started, callback.start_step = clock.now, 0
    strategy = Strategy(monkeypatch, other=[-float("inf"), 0.0, -float("inf")])  # rank 1: no signal, no NaN
    for step in range(1, 10):
        clock.now += 2.0
        callback.on_train_batch_end(trainer_at(step, strategy=strategy), None)
    assert strategy.reduces == 1 and (callback.budget.step, callback.budget.seconds) == (5, 10.0)
    strategy.other = [-float("inf"), 1.0, -7.0]  # rank 1 has a signal, and its loss was NaN at step 7
    clock.now += 2.0
    with pytest.raises(NonFiniteLossError, match="another rank's training loss is not finite at step 7"):
        callback.on_train_batch_end(trainer_at(10, strategy=strategy), None)
    assert strategy.reduces == 2 and callback.budget.seconds == 20.0 and callback.signum == signal.SIGTERM


class Steps(L.LightningModule):
    """One weight; validation every 4 steps, each recorded; ``on_step(step)`` runs after every training step."""

    def __init__(self, on_step=lambda step: None, loader_hook=lambda: None) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))
        self.on_step, self.loader_hook, self.validated = on_step, loader_hook, []

    def training_step(self, batch, batch_idx):
        self.on_step(self.global_step)
        return (self.weight * batch[0]).sum()

    def validation_step(self, batch, batch_idx):
        self.validated.append(self.global_step)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        self.loader_hook()  # between Lightning's signal handlers and on_train_start
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(40, 1)), batch_size=1)

    def val_dataloader(self):
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(2, 1)), batch_size=1)


def fit_until_signal(tmp_path, module: Steps) -> tuple[TrainingInterrupted, L.Trainer]:
    trainer = L.Trainer(max_steps=30, val_check_interval=4, log_every_n_steps=5, logger=False,
                        callbacks=[StopAndClock()], enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=str(tmp_path), num_sanity_val_steps=0)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with pytest.raises(TrainingInterrupted) as stopped:
        trainer.fit(module)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before  # handlers given back
    return stopped.value, trainer


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_saves_the_step_and_stops_at_once_without_a_validation(tmp_path, signum):
    module = Steps(on_step=lambda step: step == 5 and os.kill(os.getpid(), signum))
    stopped, trainer = fit_until_signal(tmp_path, module)
    assert (stopped.signum, stopped.step, trainer.global_step) == (signum, 6, 6)  # the step ends, then stop
    assert module.validated == [4, 4]  # the validation at step 4 only: none after the signal
    assert torch.load(stopped.checkpoint, weights_only=True)["global_step"] == 6


def test_a_sigterm_before_training_starts_is_ours_too_not_lightnings_quiet_exit(tmp_path):
    # Sent while Lightning's handler is in place (it builds the loaders after registering it): Lightning alone
    # would train to the end of the epoch and raise its SystemExit(0-like) SIGTERMException.
    module = Steps(loader_hook=lambda: os.kill(os.getpid(), signal.SIGTERM))
    stopped, trainer = fit_until_signal(tmp_path, module)
    assert (stopped.signum, stopped.step) == (signal.SIGTERM, 1) and trainer.global_step == 1
    assert Path(stopped.checkpoint).is_file() and not trainer.received_sigterm
