"""runtime/budget.py and its clock (model/training/schedule.py's TimeBudget): the time limit, timed
checkpoints (runtime/checkpoint_io.py's LastCheckpoint) and the schedule's progress, from readings of the
clock at logging steps only (a stand-in trainer and clock: the same on any machine)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

import model.training.schedule as schedule_module
from model.training.schedule import training_progress
from runtime.budget import TrainingBudget, max_time_seconds
from runtime.checkpoint_io import LastCheckpoint


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def trainer_at(step: int, every: int = 5) -> SimpleNamespace:
    """What the budget asks of Lightning's trainer: the step, whether it logs, rank 0's value, a save."""
    saves = []
    return SimpleNamespace(global_step=step, log_every_n_steps=every, should_stop=False, default_root_dir="run",
                           _logger_connector=SimpleNamespace(should_update_logs=step % every == 0),
                           strategy=SimpleNamespace(broadcast=lambda value: value), saves=saves,
                           save_checkpoint=lambda path: saves.append((step, str(path))))


def run(budget: TrainingBudget, clock: Clock, seconds_per_step, steps: int, every: int = 5,
        *others) -> list:
    """Steps 1..steps of ``seconds_per_step(step)`` each, the budget's callbacks then ``others``; returns
    (step, stopped, saves) per step."""
    for callback in (budget, *others):
        callback.on_train_start(trainer_at(0, every), None)
    seen = []
    for step in range(1, steps + 1):
        clock.now += seconds_per_step(step)
        trainer = trainer_at(step, every)
        for callback in (budget, *others):
            callback.on_train_batch_end(trainer, None)
        seen.append((step, trainer.should_stop, trainer.saves))
        if trainer.should_stop:
            break
    return seen


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(schedule_module, "time", clock)
    return clock


def test_max_time_in_seconds():
    assert max_time_seconds("00:00:30:00") == 1800.0 and max_time_seconds("01:02:03:04") == 93784.0
    assert max_time_seconds(None) is None


def test_the_stop_is_decided_at_a_reading_for_a_step_before_the_next(clock):
    budget = TrainingBudget("00:00:00:53")  # 1 s a step: 53 steps; readings every 5
    seen = run(budget, clock, lambda step: 1.0, 100)
    assert seen[-1][:2] == (53, True) and budget.stop_step == 53  # committed at the reading of step 50
    progress = [training_progress(step, budget=budget.clock) for step in (53, 27)]
    assert progress == pytest.approx([1.0, 27 / 53])


def test_one_slow_window_does_not_stop_training_early(clock):
    # A validation of 20 s in the steps 16-20: the pace is the fit's average, so the stop still comes
    # within a window of the limit, not at the first reading after the slow window.
    budget = TrainingBudget("00:00:01:40")
    seen = run(budget, clock, lambda step: 21.0 if step == 18 else 1.0, 200)
    assert 78 <= seen[-1][0] <= 82 and seen[-1][1] and clock.now <= 100 + 5


def test_timed_checkpoints_and_a_resumed_clock(clock):
    budget = TrainingBudget()  # no time limit
    last = LastCheckpoint(every_minutes=0.5, time_budget=budget.clock)  # last.ckpt every 30 s of training
    seen = run(budget, clock, lambda step: 4.0, 40, 5, last)
    assert [saves for _, _, saves in seen if saves] == [[(10, "run/checkpoints/last.ckpt")],
                                                        [(20, "run/checkpoints/last.ckpt")],
                                                        [(30, "run/checkpoints/last.ckpt")],
                                                        [(40, "run/checkpoints/last.ckpt")]]
    assert training_progress(40, 100, budget.clock) == 0.4 and training_progress(40, budget=budget.clock) is None
    state = budget.state_dict()
    resumed = TrainingBudget("00:00:05:00")
    resumed.load_state_dict(state)  # a resumed run goes on from 160 s of its 300
    resumed.on_train_start(trainer_at(40), None)
    assert training_progress(40, budget=resumed.clock) == pytest.approx(160 / 300)


def test_last_checkpoint_every_n_steps_is_written_once_per_step_also_when_asked_again(clock):
    last = LastCheckpoint(every_n_steps=10)
    seen = run(TrainingBudget(), clock, lambda step: 1.0, 25, 5, last)
    assert [saves for _, _, saves in seen if saves] == [[(10, "run/checkpoints/last.ckpt")],
                                                        [(20, "run/checkpoints/last.ckpt")]]
    trainer = trainer_at(20)
    assert last.save(trainer) == Path("run/checkpoints/last.ckpt") and trainer.saves == []  # step 20 is saved
    trainer = trainer_at(21)
    last.save(trainer)  # a signal's save at another step: written
    assert trainer.saves == [(21, "run/checkpoints/last.ckpt")]
