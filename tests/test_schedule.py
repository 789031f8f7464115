"""model/training/schedule.py: warm-up, inverse-square-root decay, and the decay to zero over the budget."""

import doctest
import math

import pytest

import model.training.schedule as schedule_module
from model.training.schedule import budget_schedule


def test_warm_up_then_inverse_sqrt_decay():
    factor = budget_schedule(100, "inverse_sqrt")
    assert [factor(s, None) for s in (0, 1, 50, 100)] == pytest.approx([0.01, 0.01, 0.5, 1.0])
    assert factor(400, None) == pytest.approx(0.5) and factor(10_000, 0.3) == pytest.approx(0.1)
    assert max(factor(s, None) for s in range(1, 1000)) == 1.0  # the peak is the configured learning rate


@pytest.mark.parametrize("decay", ["linear", "cosine"])
def test_budget_schedule_reaches_zero_exactly_when_the_budget_is_spent(decay):
    factor = budget_schedule(100, decay=decay)
    assert factor(50, 0.0) == pytest.approx(0.5) and factor(100, 0.0) == 1.0  # warm-up in steps
    assert factor(5000, 1.0) == 0.0 and factor(5000, 1.7) == 0.0  # spent (a late step never goes negative)
    middle = 0.5 if decay == "linear" else 0.5 * (1 + math.cos(math.pi / 2))
    assert factor(5000, 0.5) == pytest.approx(middle)
    values = [factor(1000, p / 20) for p in range(21)]
    assert all(a > b for a, b in zip(values, values[1:]))  # strictly decreasing in elapsed budget
    # during warm-up the two factors multiply: the rate never jumps when warm-up ends
    assert factor(99, 0.2) == pytest.approx(0.99 * budget_schedule(100, decay=decay)(1000, 0.2))


def test_budget_schedule_floor_and_fallback_without_a_budget():
    assert budget_schedule(10, final=0.1)(100, 1.0) == pytest.approx(0.1)
    assert budget_schedule(10)(40, None) == budget_schedule(10, "inverse_sqrt")(40, None) == pytest.approx(0.5)
    assert budget_schedule(10, decay="inverse_sqrt")(40, 0.99) == pytest.approx(0.5)  # the budget ignored


def test_docstring_examples_and_bad_settings():
    assert doctest.testmod(schedule_module).failed == 0
    with pytest.raises(ValueError, match="warmup_steps"):
        budget_schedule(0, "inverse_sqrt")
    with pytest.raises(ValueError, match="decay=.* must be one of linear, cosine, inverse_sqrt"):
        budget_schedule(10, decay="exponential")
    with pytest.raises(ValueError, match="final"):
        budget_schedule(10, final=1.5)
