"""What a training step costs on a GPU, measured inside a real run: the share of the step the GPU is
busy, the host syncs on steps that are not logging steps, the steps per second and peak memory.

Switched on by ``scripts/gpu_check.sh`` (``callbacks.step_probe``). Rank 0 writes ``step_probe.json`` into the run
folder when training ends; on a CPU it says what it cannot measure.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import lightning as L
import torch

from model.training.trainer_state import is_logging_step


def busy_microseconds(intervals: list[tuple[float, float]]) -> float:
    """Time covered by at least one of the (start, end) intervals: kernels on several streams overlap."""
    busy, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy


class StepProbe(L.Callback):
    """Profiles ``profile_steps`` training steps from ``start_step`` (GPU kernel time, merged over streams, against
    the host's wall time), then counts the host syncs ``set_sync_debug_mode("warn")`` reports over ``sync_steps``."""

    def __init__(self, start_step: int = 100, profile_steps: int = 20, sync_steps: int = 50) -> None:
        self.start_step, self.profile_steps, self.sync_steps = start_step, profile_steps, sync_steps
        self.result: dict = {"start_step": start_step}
        self._profiler = None
        self._since = 0.0
        self._caught = None  # the warnings.catch_warnings of the sync window
        self._records: list = []
        self._syncs: list[tuple[int, bool, int]] = []  # (step, logging step, syncs) in the sync window
        self._before = 0

    def _cuda(self, trainer: L.Trainer) -> bool:
        return trainer.strategy.root_device.type == "cuda"

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        step, profile_end = trainer.global_step, self.start_step + self.profile_steps
        if step == self.start_step:
            self._start_profile(trainer)
        elif step == profile_end:
            self._stop_profile(trainer, self.profile_steps)
            if self._cuda(trainer) and self.sync_steps:  # the sync window: each synchronizing call warns
                self._caught = warnings.catch_warnings(record=True)
                self._records = self._caught.__enter__()
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
        if self._caught is not None:
            self._before = len(self._records)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        if self._caught is None:
            return
        syncs = sum("synchroniz" in str(record.message) for record in self._records[self._before:])
        self._syncs.append((trainer.global_step - 1, bool(is_logging_step(trainer)), syncs))
        if len(self._syncs) >= self.sync_steps:
            self._stop_sync_count()

    def _start_profile(self, trainer: L.Trainer) -> None:
        if self._cuda(trainer):
            torch.cuda.synchronize()
            self._profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            self._profiler.__enter__()
        self._since = time.perf_counter()

    def _stop_profile(self, trainer: L.Trainer, steps: int) -> None:
        cuda = self._cuda(trainer)
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - self._since
        self._since = 0.0
        self.result |= {"profiled_steps": steps, "steps_per_s": round(steps / wall, 2)}
        if not cuda:
            self.result["gpu_busy_share"] = "not measured: no CUDA device"
            return
        try:
            self._profiler.__exit__(None, None, None)
            kernels = [(e.time_range.start, e.time_range.end) for e in self._profiler.events()
                       if e.device_type == torch.autograd.DeviceType.CUDA]
            self.result["gpu_busy_share"] = round(busy_microseconds(kernels) / 1e6 / wall, 4)
        except Exception as error:  # the check answers, whatever the profiler does
            self.result["gpu_busy_share"] = f"not measured: {type(error).__name__}: {error}"

    def _stop_sync_count(self) -> None:
        torch.cuda.set_sync_debug_mode(0)
        self._caught.__exit__(None, None, None)
        self._caught = None
        off_logging = [syncs for _, logging, syncs in self._syncs if not logging]
        self.result |= {"sync_counted_steps": len(self._syncs), "host_syncs_off_logging_steps": sum(off_logging),
                        "host_syncs_on_logging_steps": sum(s for _, logging, s in self._syncs if logging)}

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._since and trainer.global_step > self.start_step:  # training ended inside the profiled steps
            self._stop_profile(trainer, trainer.global_step - self.start_step)
        if self._caught is not None:  # ... or inside the sync window
            self._stop_sync_count()
        if self._cuda(trainer):
            self.result["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        else:
            self.result.setdefault("host_syncs_off_logging_steps", "not measured: no CUDA device")
        self.result.setdefault("gpu_busy_share", f"not measured: training ended before step {self.start_step}")
        if trainer.is_global_zero:
            path = Path(trainer.default_root_dir) / "step_probe.json"
            path.write_text(json.dumps(self.result, indent=2))
