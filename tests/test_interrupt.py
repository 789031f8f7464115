"""runtime/interrupt.py through train.py: Ctrl-C and SIGTERM end the step, save it once and stop;
the same command resumes. Under DDP (two gloo processes on the CPU) with every collective counted."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from helpers import NO_VIEWS, ROOT, final_step, run_train


# SIGTERM with checkpoints written in the background (the GPU's way): the run waits for the write.
@pytest.mark.parametrize("signum, code, asynchronous", [(signal.SIGINT, 130, False), (signal.SIGTERM, 143, True)])
def test_a_signal_saves_the_step_and_the_same_command_resumes(tmp_path, data_cache, signum, code, asynchronous):
    run_dir = tmp_path / "signalled"
    last = run_dir / "checkpoints" / "last.ckpt"
    args = ("logger=csv", "test=false", "trainer.max_steps=100", f"runtime.asynchronous_checkpoints={asynchronous}", NO_VIEWS)
    # A background job of a non-interactive shell inherits SIGINT ignored: give the child the default.
    process = run_train(run_dir, data_cache, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while not last.is_file() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == code, stderr[-3000:]
    saved_at = torch.load(last, weights_only=True)["global_step"]
    assert 10 <= saved_at < 100 and not (run_dir / "checkpoints" / "final.ckpt").exists()
    last_line = stderr.strip().splitlines()[-1]
    assert last_line == (f"train.py: stopped by {signal.Signals(signum).name} at step {saved_at}; saved {last}: "
                         f"run the same command to resume from it")
    assert "Traceback" not in stderr
    if not asynchronous:  # resuming is the same whichever signal stopped the run: once is enough
        return
    result = run_train(run_dir, data_cache, *args)  # the same command: resumes from that step, quietly
    assert "not resumable" not in result.stdout + result.stderr and "resuming the interrupted run" in result.stdout
    assert saved_at < final_step(run_dir) <= 100  # it went on from there (early stopping may end it sooner)


def ddp_counts(counts: Path, steps: int) -> list[dict]:
    """Each rank's training steps with the collectives called in them (``tests/count_collectives.py``), checked
    alike for both ranks: ``steps`` each (they stopped together), none called outside a logging step but by the
    last (the stop, decided together), rank 0's clock broadcast at every logging step. Returns the quiet steps."""
    ranks = [json.loads((counts / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == steps
    quiet = []
    for records in ranks:
        *running, last = records
        quiet += [step for step in running if not step["logging"]]
        assert all("broadcast_object_list" in step["calls"] for step in running if step["logging"])  # the clock
    assert [step for step in quiet if step["calls"]] == []
    return quiet


def test_ddp_steps_call_no_collective_off_logging_steps_sigterm_saves_once_and_the_run_resumes_to_max_time(
        tmp_path, data_cache):
    # Two gloo processes on the CPU, every torch.distributed collective counted per training step in each. The
    # first launch is stopped by SIGTERM to both ranks; the same command resumes it, and it stops at
    # runtime.max_time (6 s of training in all, decided at logging steps only).
    run_dir = tmp_path / "ddp"
    last = run_dir / "checkpoints" / "last.ckpt"
    command = [sys.executable, str(ROOT / "tests" / "count_collectives.py"), "experiment=smoke",
               f"hydra.run.dir={run_dir}", f"data.cache_dir={data_cache}", "trainer=ddp", "trainer.accelerator=cpu",
               "trainer.devices=2", "logger=csv", "test=false", "trainer.max_steps=-1", "runtime.max_time=00:00:00:06",
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
    assert len(quiet) > 10 and "00:00:00:06" in (run_dir / "config.yaml").read_text()
    assert not list(last.parent.glob(".*partial"))
