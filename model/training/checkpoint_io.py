"""Checkpoints that survive faults: atomic writes, and a resume point that is known to load.

A kill during ``torch.save`` leaves a truncated file; written in place, that file is
``last.ckpt``, and every rerun would crash on it. So every checkpoint is written to a
temporary file beside its target, flushed to disk, then renamed over it (a rename is
atomic): a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from model.inference.run_folder import RunLoadError, read_checkpoint

log = logging.getLogger(__name__)


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (a full disk, a read-only folder): the previous one is intact."""


def os_cause(error: BaseException) -> OSError | None:
    """The operating system's error behind ``error``: torch.save reports a full disk as a RuntimeError
    ("unexpected pos") whose context is the real ``OSError``."""
    while error is not None and not isinstance(error, OSError):
        error = error.__cause__ or error.__context__
    return error


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's ``torch.save`` checkpoints, written atomically (temporary file, fsync, rename).

    A write that fails leaves no temporary file and the previous checkpoint whole, and is one
    ``CheckpointWriteError`` naming the file and the cause.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        path = Path(path)
        partial = path.with_name(f".{path.name}.partial")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(partial, "wb") as out:
                torch.save(checkpoint, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, path)
        except (OSError, RuntimeError) as error:
            cause = os_cause(error)
            if cause is None:
                raise
            partial.unlink(missing_ok=True)
            raise CheckpointWriteError(cause.errno, f"{path}: cannot write the checkpoint "
                                                    f"({cause.strerror or cause}); the previous one is intact") from None


def resume_point(run_dir: Path) -> Path | None:
    """The checkpoint an interrupted run resumes from: ``last.ckpt``, else ``best.ckpt``, if it loads
    (``read_checkpoint``: safely, with finite weights) and holds a training state.

    An unreadable one is skipped with a warning (and left in place for inspection); with
    none left the run starts afresh.
    """
    for name in ("last.ckpt", "best.ckpt"):
        path = run_dir / "checkpoints" / name
        if not path.is_file():
            continue
        try:
            if "global_step" in read_checkpoint(path):
                return path
        except RunLoadError:
            pass
        log.warning("%s does not load (truncated, corrupt or not finite): not resuming from it", path)
    return None
