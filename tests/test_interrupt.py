"""runtime/stop_and_clock.py through train.py: Ctrl-C and SIGTERM end the step, save it once and stop at once;
the same command resumes; a finished run folder is refused, untouched. Under DDP (two gloo processes on the CPU)
with every collective counted."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from helpers import NO_VIEWS, ROOT, final_step, run_train, train_in_process
from runtime.settings import SettingsError


# SIGTERM with checkpoints written in the background (the GPU's way): the run waits for the write. (Ctrl-C, the
# same path with exit 130: tests/test_stop_and_clock.py, in-process.)
def test_sigterm_saves_the_step_exits_at_once_and_the_same_command_resumes(tmp_path, data_cache):
    run_dir = tmp_path / "signalled"
    last = run_dir / "checkpoints" / "last.ckpt"
    args = ("logger=csv", "test=false", "trainer.max_steps=30", "runtime.asynchronous_checkpoints=true")
    launched = time.time()
    process = run_train(run_dir, data_cache, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not last.is_file() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    started_to_first_save = time.time() - launched
    signalled = time.time()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    signal_to_exit = time.time() - signalled
    assert process.returncode == 143, stderr[-3000:]
    saved_at = torch.load(last, weights_only=True)["global_step"]
    assert 10 <= saved_at < 30 and not (run_dir / "checkpoints" / "final.ckpt").exists()
    # Saved and gone at once: no validation (the first is at step 30) and no pictures before the exit, and the
    # exit a small part of what starting the run took (imports, data, model: ~10 s here, 0.1-0.5 s to exit).
    metrics = "".join(path.read_text() for path in (run_dir / "csv").rglob("metrics.csv"))
    assert "train/loss" in metrics and "val/loss" not in metrics and not (run_dir / "attention").exists()
    assert signal_to_exit < started_to_first_save / 3, (signal_to_exit, started_to_first_save)
    last_line = stderr.strip().splitlines()[-1]
    assert last_line == (f"train.py: stopped by SIGTERM at step {saved_at}; saved {last}: "
                         f"run the same command to resume from it")
    assert "Traceback" not in stderr
    result = run_train(run_dir, data_cache, *args)  # the same command: resumes from that step, quietly
    assert "not resumable" not in result.stdout + result.stderr and "resuming the interrupted run" in result.stdout
    assert saved_at < final_step(run_dir) == 30  # it went on from there to the end


def ddp_counts(counts: Path, steps: int) -> list[dict]:
    """Each rank's training steps with the collectives called in them (``tests/count_collectives.py``), checked
    alike for both ranks: ``steps`` each (they stopped together), none called outside a logging step but by the
    last (the stop, decided together), one all-reduce at every logging step. Returns the quiet steps."""
    ranks = [json.loads((counts / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == steps
    quiet = []
    for records in ranks:
        *running, last = records
        quiet += [step for step in running if not step["logging"]]
        readings = [step["calls"] for step in running if step["logging"]]
        # One all-reduce carries rank 0's clock, the signal vote and the non-finite check; a save adds its own.
        assert readings and all(calls[:1] == ["all_reduce"] for calls in readings)
        assert all(calls == ["all_reduce"] for calls in readings if "barrier" not in calls)
    assert [step for step in quiet if step["calls"]] == []
    return quiet


def test_ddp_steps_call_no_collective_off_logging_steps_sigterm_saves_once_and_the_run_resumes_to_max_time(
        tmp_path, data_cache):
    # Two gloo processes on the CPU, every torch.distributed collective counted per training step in each. The
    # first launch is stopped by SIGTERM to both ranks; the same command resumes it, and it stops at
    # runtime.max_time (4 s of training in all, decided at logging steps only).
    run_dir = tmp_path / "ddp"
    last = run_dir / "checkpoints" / "last.ckpt"
    command = [sys.executable, str(ROOT / "tests" / "count_collectives.py"), "experiment=smoke",
               f"hydra.run.dir={run_dir}", f"data.cache_dir={data_cache}", "trainer=ddp", "trainer.accelerator=cpu",
               "trainer.devices=2", "logger=csv", "test=false", "trainer.max_steps=-1", "runtime.max_time=00:00:00:04",
               "callbacks.early_stopping=null", NO_VIEWS]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True,  # its own process group, as a scheduler's job has
                               env=os.environ | {"COLLECTIVES_DIR": str(tmp_path / "signalled")})
    deadline = time.time() + 300
    while not last.is_file() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    ranks = [int(pid) for pid in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()]
    assert len(ranks) == 1  # rank 1, launched by rank 0
    os.killpg(process.pid, signal.SIGTERM)  # both ranks at once, as Slurm or systemd stop a job
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 143 and "Traceback" not in stderr, stderr[-3000:]
    saved_at = torch.load(last, weights_only=True)["global_step"]
    assert saved_at >= 10 and not (run_dir / "checkpoints" / "final.ckpt").exists()
    assert stderr.count("train.py: stopped by SIGTERM") == 1  # one rank says it, for both
    assert stderr.strip().splitlines()[-1] == (f"train.py: stopped by SIGTERM at step {saved_at}; saved {last}: "
                                               f"run the same command to resume from it")
    quiet = ddp_counts(tmp_path / "signalled", saved_at)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env=os.environ | {"COLLECTIVES_DIR": str(tmp_path / "resumed")})  # the same command
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resuming the interrupted run" in result.stdout + result.stderr
    quiet += ddp_counts(tmp_path / "resumed", final_step(run_dir) - saved_at)  # until max_time, both ranks
    assert len(quiet) > 10 and "00:00:00:04" in (run_dir / "config.yaml").read_text()
    assert not list(last.parent.glob(".*partial"))


def test_a_finished_run_folder_is_refused_in_one_line_and_nothing_in_it_changes(smoke_run, data_cache, tmp_path):
    finished = shutil.copytree(smoke_run, tmp_path / "finished")
    before = {path: path.read_bytes() for path in finished.rglob("*") if path.is_file()}
    result = run_train(finished, data_cache, "logger=csv", check=False)  # the same command again
    assert result.returncode == 1 and result.stderr.strip().splitlines()[-1] == (
        f"train.py: {finished} holds a finished run (final.ckpt): translate with it, or train again in a new "
        f"folder (hydra.run.dir=...)")
    assert {path: path.read_bytes() for path in finished.rglob("*") if path.is_file()} == before  # Hydra's too
    alone = tmp_path / "final_only"  # a folder holding nothing but final weights is finished too
    (alone / "checkpoints").mkdir(parents=True)
    (alone / "checkpoints" / "final.ckpt").write_bytes(before[finished / "checkpoints" / "final.ckpt"])
    with pytest.raises(SettingsError, match="holds a finished run"):  # in-process as well
        train_in_process(alone, data_cache, "logger=csv")
    assert [path.name for path in alone.rglob("*")] == ["checkpoints", "final.ckpt"]
