"""A run's folder and the machinery's own settings (``runtime_problems``): what a continued run must keep (tokenizer,
model shape, seed), a finished run kept whole, one ``train.py`` at a time, where a run resumes."""

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout
from omegaconf import DictConfig, OmegaConf

from data.data_settings import CORPUS_KEYS
from data.languages import pair_of
from data.tokenizer import tokenizer_fingerprint
from data.truecase import FILE as TRUECASE_FILE
from runtime.stop_and_clock import max_time_seconds, resume_point

log = logging.getLogger("train")

PRECISIONS = ("auto", "bf16-mixed", "16-mixed", "32-true", "bf16-true", "16-true", "64-true")  # and Lightning's aliases
ALIASES = ("bf16", "16", "32", "64", 16, 32, 64)
# Settings that decide the pairs, the splits and the BPE vocabulary: a run folder keeps its own (the pair and the
# seed are checked on their own).
DATA_KEYS = (*(k for k in CORPUS_KEYS if k not in ("source_lang", "target_lang", "seed")), "vocab_size",
             "joint_vocab", "tokenizer_from")


class SettingsError(ValueError):
    """Settings that cannot work, found before anything is built or written: one line."""


def runtime_problems(settings: DictConfig, prefix: str = "") -> list[str]:
    """What the run machinery refuses among ``settings`` (``configs/runtime/``), one phrase each."""
    problems, get = [], settings.get
    try:
        max_time_seconds(get("max_time"))
    except ValueError:
        problems.append(f"{prefix}max_time={get('max_time')!r} must be DD:HH:MM:SS (e.g. 00:00:30:00), or null")
    if get("precision") not in PRECISIONS + ALIASES:
        problems.append(f"{prefix}precision={get('precision')!r} must be one of {', '.join(PRECISIONS)}")
    if (value := get("asynchronous_checkpoints")) not in ("auto", True, False):
        problems.append(f"{prefix}asynchronous_checkpoints={value!r} must be auto, true or false")
    for key, kinds in (("last_every_n_steps", int), ("last_every_minutes", (int, float))):
        value = get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds) or value <= 0):
            problems.append(f"{prefix}{key}={value!r} must be a {'whole number' if kinds is int else 'number'} "
                            f"above 0, or null")
    return problems


def check_run_folder(cfg: DictConfig, run_dir: Path, model_config: dict, tokenizer_folder: Path) -> None:
    """Refuse to continue a run in ``run_dir`` with settings that change its tokenizer or model."""
    saved = run_dir / "config.yaml"
    if not saved.is_file() or not list(run_dir.glob("checkpoints/*.ckpt")):
        return  # nothing to continue: a new run
    old = OmegaConf.load(saved)
    differ = [f"model.{k}" for k, v in model_config.items() if old.model.get(k) != v]
    differ += [f"data.{k}" for k in DATA_KEYS if k in old.data and old.data[k] != cfg.data.get(k)]
    differ += ["data.source_lang / data.target_lang"] if pair_of(old.data) != pair_of(cfg.data) else []  # old: en→es
    differ += ["seed"] if old.get("seed") != cfg.seed else []
    averages = lambda config: bool((config.get("callbacks") or {}).get("weight_averaging"))  # noqa: E731
    differ += ["averaging"] if averages(old) != averages(cfg) else []  # which weights last.ckpt's state_dict holds
    if not differ and tokenizer_fingerprint(run_dir) != tokenizer_fingerprint(tokenizer_folder):
        before = not (run_dir / TRUECASE_FILE).is_file() and (tokenizer_folder / TRUECASE_FILE).is_file()
        differ.append("the tokenizer (tokenizer.json" + (": this run's reads lines as they are, from before every line "
                      "was read with a leading space and its first word in its usual case" if before else "") + ")")
    if differ:
        raise SettingsError(f"{run_dir} holds a run with other settings ({', '.join(differ)}): continue it with "
                            f"its own settings ({saved}), or start a new run folder (hydra.run.dir=...)")


def refuse_finished_run(run_dir: Path) -> None:
    """A run folder whose run ended (``final.ckpt``) is never trained into again."""
    if (run_dir / "checkpoints" / "final.ckpt").exists():
        raise SettingsError(f"{run_dir} holds a finished run (final.ckpt): translate with it, or train again in a "
                            f"new folder (hydra.run.dir=...)")


def first_rank() -> bool:
    """This process is rank 0 of its run (or the run has one process): the one that speaks for all."""
    return all(os.environ.get(name, "0") == "0" for name in ("LOCAL_RANK", "NODE_RANK", "RANK", "SLURM_PROCID"))


@contextmanager
def held_run_folder(run_dir: Path) -> Iterator[None]:
    """``run_dir`` held for the whole run: one ``train.py`` at a time (flock: a killed run's lock goes with it)."""
    if not first_rank():  # DDP's other ranks: the same run
        yield
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    lock, owner = FileLock(str(run_dir / ".train.lock")), run_dir / ".train.pid"
    try:
        lock.acquire(timeout=0)
    except Timeout:
        holder = owner.read_text().strip() if owner.is_file() else "?"
        raise SettingsError(f"{run_dir} is in use by another train.py (process {holder}): wait for it to end, or "
                            f"give this run its own folder (hydra.run.dir=...)") from None
    owner.write_text(str(os.getpid()))
    try:
        yield
    finally:
        owner.unlink(missing_ok=True)
        lock.release()


def resume_from(cfg: DictConfig) -> str | None:
    """Where training starts: ``ckpt_path=`` (checked with the settings), else the run folder's last interrupted
    run, else nothing (a new run)."""
    if cfg.ckpt_path:
        return str(cfg.ckpt_path)
    if (point := resume_point(Path(cfg.paths.output_dir))) is not None:
        log.info("resuming the interrupted run from %s (its step, optimizer and schedule; the interrupted "
                 "epoch's data order starts over)", point)
    return str(point) if point else None
