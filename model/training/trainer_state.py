"""What a Trainer is doing now, and the private Lightning attributes this project reads or sets.

Every private Lightning attribute the project touches is read or set here, and only here, each one under
a test (``tests/test_trainer_state.py``) that fails when Lightning changes what it means:

- ``trainer._logger_connector.should_update_logs``: whether this step's metrics go to the loggers. Lightning
  decides it (steps counted its own way, across resumes and validations); a copy of its rule would drift.
- ``_TrainingEpochLoop._broadcast_sigterm_tensor``: Lightning (>= 2.6) broadcasts a SIGTERM flag before every
  DDP step and reads it back, a collective and a host wait per step.

(torch's one, a fused optimizer's ``found_inf``, is set by the non-finite guard, ``runtime/non_finite.py``,
under its own test.)
"""

from __future__ import annotations

import lightning as L


def fitting(trainer: L.Trainer) -> bool:
    """The trainer is in ``fit`` and past its sanity check: validations count, time to quality is measured."""
    return trainer.state.fn == "fit" and not trainer.sanity_checking


def is_logging_step(trainer: L.Trainer) -> bool:
    """Whether Lightning sends this training step's metrics to the loggers (every ``log_every_n_steps``):
    the steps at which reading device values back to Python is allowed."""
    return trainer._logger_connector.should_update_logs


def skip_sigterm_broadcast(trainer: L.Trainer) -> None:
    """Stop Lightning's per-step SIGTERM broadcast under DDP (its handler must be replaced first: the flag it
    sends is then never set, and a decision at logging steps stands in for it)."""
    epoch_loop = trainer.fit_loop.epoch_loop
    if trainer.world_size > 1 and hasattr(epoch_loop, "_broadcast_sigterm_tensor"):
        epoch_loop._broadcast_sigterm_tensor = lambda: None
