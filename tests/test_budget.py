"""model/training/budget.py: the time limit, timed checkpoints and the schedule's progress, from readings
of the clock at logging steps only (a stand-in trainer and clock: the same on any machine)."""

from types import SimpleNamespace

import pytest

import model.training.budget as budget_module
from model.training.budget import TrainingBudget, max_time_seconds


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


def run(budget: TrainingBudget, clock: Clock, seconds_per_step, steps: int, every: int = 5) -> list:
    """Steps 1..steps of ``seconds_per_step(step)`` each; returns (step, stopped, saves) per step."""
    budget.on_train_start(trainer_at(0, every), None)
    seen = []
    for step in range(1, steps + 1):
        clock.now += seconds_per_step(step)
        trainer = trainer_at(step, every)
        budget.on_train_batch_end(trainer, None)
        seen.append((step, trainer.should_stop, trainer.saves))
        if trainer.should_stop:
            break
    return seen


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(budget_module, "time", clock)
    return clock


def test_max_time_in_seconds():
    assert max_time_seconds("00:00:30:00") == 1800.0 and max_time_seconds("01:02:03:04") == 93784.0
    assert max_time_seconds(None) is None


def test_the_stop_is_decided_at_a_reading_for_a_step_before_the_next(clock):
    budget = TrainingBudget("00:00:00:53")  # 1 s a step: 53 steps; readings every 5
    seen = run(budget, clock, lambda step: 1.0, 100)
    assert seen[-1][:2] == (53, True) and budget.stop_step == 53  # committed at the reading of step 50
    assert budget.progress(53) == pytest.approx(1.0) and budget.progress(27) == pytest.approx(27 / 53)


def test_one_slow_window_does_not_stop_training_early(clock):
    # A validation of 20 s in the steps 16-20: the pace is the fit's average, so the stop still comes
    # within a window of the limit, not at the first reading after the slow window.
    budget = TrainingBudget("00:00:01:40")
    seen = run(budget, clock, lambda step: 21.0 if step == 18 else 1.0, 200)
    assert 78 <= seen[-1][0] <= 82 and seen[-1][1] and clock.now <= 100 + 5


def test_timed_checkpoints_and_a_resumed_clock(clock):
    budget = TrainingBudget(save_every_minutes=0.5)  # every 30 s, no time limit
    seen = run(budget, clock, lambda step: 4.0, 40)
    assert [saves for _, _, saves in seen if saves] == [[(10, "run/checkpoints/last.ckpt")],
                                                        [(20, "run/checkpoints/last.ckpt")],
                                                        [(30, "run/checkpoints/last.ckpt")],
                                                        [(40, "run/checkpoints/last.ckpt")]]
    assert budget.progress(40, max_steps=100) == 0.4 and budget.progress(40) is None  # steps only
    state = budget.state_dict()
    resumed = TrainingBudget("00:00:05:00")
    resumed.load_state_dict(state)  # a resumed run goes on from 160 s of its 300
    resumed.on_train_start(trainer_at(40), None)
    assert resumed.progress(40) == pytest.approx(160 / 300)
