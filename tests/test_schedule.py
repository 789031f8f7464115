"""model/schedule.py: warm-up and inverse-square-root decay."""

import doctest

import pytest

import model.schedule
from model.schedule import inverse_sqrt_schedule


def test_warm_up_then_inverse_sqrt_decay():
    factor = inverse_sqrt_schedule(100)
    assert [factor(s) for s in (0, 1, 50, 100)] == pytest.approx([0.01, 0.01, 0.5, 1.0])
    assert factor(400) == pytest.approx(0.5) and factor(10_000) == pytest.approx(0.1)
    assert max(factor(s) for s in range(1, 1000)) == 1.0  # the peak is the configured learning rate


def test_docstring_example_and_bad_warmup():
    assert doctest.testmod(model.schedule).failed == 0
    with pytest.raises(ValueError, match="warmup_steps"):
        inverse_sqrt_schedule(0)
