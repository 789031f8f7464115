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

log = logging.getLogger(__name__)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's ``torch.save`` checkpoints, written atomically (temporary file, fsync, rename)."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        with open(partial, "wb") as out:
            torch.save(checkpoint, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)


def loads(path: Path) -> bool:
    """True if ``path`` reads back with ``torch.load(weights_only=True)`` as a checkpoint with finite weights."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 — truncated, corrupt or unsafe: not a resume point
        return False
    if not isinstance(state, dict) or "state_dict" not in state or "global_step" not in state:
        return False
    return finite_weights(state["state_dict"])


def finite_weights(state_dict: dict[str, torch.Tensor]) -> bool:
    """True if no floating-point tensor of ``state_dict`` holds a NaN or an inf (a diverged run's do)."""
    return all(torch.isfinite(w).all() for w in state_dict.values() if w.is_floating_point())


def resume_point(run_dir: Path) -> Path | None:
    """The checkpoint an interrupted run resumes from: ``last.ckpt``, else ``best.ckpt``, if it loads.

    An unreadable one is skipped with a warning (and left in place for inspection); with
    none left the run starts afresh.
    """
    for name in ("last.ckpt", "best.ckpt"):
        path = run_dir / "checkpoints" / name
        if not path.is_file():
            continue
        if loads(path):
            return path
        log.warning("%s does not load (truncated, corrupt or not finite): not resuming from it", path)
    return None
