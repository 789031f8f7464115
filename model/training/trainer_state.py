"""What a Trainer is doing now; the private Lightning attribute read here is under ``tests/test_trainer_state.py``."""

from __future__ import annotations

import lightning as L


def fitting(trainer: L.Trainer) -> bool:
    """The trainer is in ``fit`` and past its sanity check: validations count, time to quality is measured."""
    return trainer.state.fn == "fit" and not trainer.sanity_checking


def is_logging_step(trainer: L.Trainer) -> bool:
    """Whether Lightning logs this step (every ``log_every_n_steps``): when reading the device back is allowed."""
    return trainer._logger_connector.should_update_logs  # private, but a copy of Lightning's rule would drift
