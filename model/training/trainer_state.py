"""What a Trainer is doing now; the one adapter to Lightning's private attributes (tests/test_trainer_state.py)."""

from __future__ import annotations

import lightning as L


def fitting(trainer: L.Trainer) -> bool:
    """The trainer is in ``fit`` and past its sanity check: validations count, time to quality is measured."""
    return trainer.state.fn == "fit" and not trainer.sanity_checking


def is_logging_step(trainer: L.Trainer) -> bool:
    """Whether Lightning logs this step (every ``log_every_n_steps``): when reading the device back is allowed."""
    return trainer._logger_connector.should_update_logs  # private, but a copy of Lightning's rule would drift


def take_lightning_sigterm(trainer: L.Trainer) -> bool:
    """Whether Lightning's handler caught a SIGTERM (cleared: it would end the epoch, exit 0); its DDP broadcast off."""
    connector, epoch_loop = trainer._signal_connector, trainer.fit_loop.epoch_loop
    if trainer.world_size > 1 and hasattr(epoch_loop, "_broadcast_sigterm_tensor"):
        epoch_loop._broadcast_sigterm_tensor = lambda: None
    caught, connector.received_sigterm = connector.received_sigterm, False
    return caught


def without_anonymous(logger) -> None:
    """Drop the ``anonymous=None`` Lightning passes to ``wandb.init``: wandb >= 0.22 prints a deprecation for it."""
    logger._wandb_init.pop("anonymous", None)

