"""``python tests/count_collectives.py ARGS``: ``python train.py ARGS`` with every ``torch.distributed``
collective counted per training step, in each rank (Lightning's DDP launcher starts the other ranks
with this same command line, so they are counted too).

Each rank writes ``$COLLECTIVES_DIR/rank<N>.json`` at exit: one record per training step (the
optimizer step and its callbacks: Lightning's ``advance``), with whether it was a logging step and
the collectives called in it. DDP's own gradient all-reduce runs in its C++ reducer, overlapped with
the backward pass, and is not a call of this API: it is not counted.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import sys
from pathlib import Path

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from lightning.pytorch.loops.training_epoch_loop import _TrainingEpochLoop

COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "all_gather_object", "all_gather_into_tensor",
               "broadcast_object_list", "barrier", "monitored_barrier", "reduce", "gather", "gather_object",
               "scatter", "scatter_object_list", "reduce_scatter", "reduce_scatter_tensor", "all_to_all")
steps: list[dict] = []  # {"step", "logging", "calls"} per training step
current: dict | None = None  # the step in progress
depth = 0  # a collective called inside another (broadcast_object_list -> broadcast) counts once


def counted(name: str, function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        global depth
        if depth == 0 and current is not None:
            current["calls"].append(name)
        depth += 1
        try:
            return function(*args, **kwargs)
        finally:
            depth -= 1
    return wrapper


for name in COLLECTIVES:
    original = getattr(c10d, name, None)
    if original is not None:
        wrapped = counted(name, original)
        setattr(c10d, name, wrapped)
        setattr(dist, name, wrapped)

real_advance = _TrainingEpochLoop.advance


def advance(self, data_fetcher):
    global current
    from model.training.trainer_state import is_logging_step

    current = {"step": self.trainer.global_step, "logging": bool(is_logging_step(self.trainer)), "calls": []}
    try:
        return real_advance(self, data_fetcher)
    finally:
        steps.append(current)
        current = None


_TrainingEpochLoop.advance = advance


@atexit.register
def write_counts() -> None:
    folder = Path(os.environ["COLLECTIVES_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rank{os.environ.get('LOCAL_RANK', '0')}.json").write_text(json.dumps(steps))


if __name__ == "__main__":
    # train.py run as the main program, with sys.argv[0] left as this file: the launcher starts the other
    # ranks with this same command (runpy would make it train.py).
    train = Path(__file__).resolve().parents[1] / "train.py"
    sys.path.insert(0, str(train.parent))
    exec(compile(train.read_text(), str(train), "exec"), {"__name__": "__main__", "__file__": str(train)})
