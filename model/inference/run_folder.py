"""A run folder, read safely: its checkpoints, its tokenizer and the settings it was trained with.

The one checkpoint reader of the project (``read_checkpoint``): ``torch.load(weights_only=True)``,
tensors and plain values only, never arbitrary objects; training uses it too, to pick the
checkpoint an interrupted run resumes from. Imports neither Lightning nor Hydra.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from data.languages import LanguagePair, pair_of
from data.tokenizer import JOINT_FILE, SRC_FILE, TranslationTokenizer, tokenizer_fingerprint
from model.confidence import Calibration, Combination
from model.search import SearchConfig
from model.transformer import Seq2SeqTransformer

log = logging.getLogger(__name__)
CHECKPOINT_PREFERENCE = ("final.ckpt", "best.ckpt", "last.ckpt")
CALIBRATION_FILE = "confidence.json"  # where the marks change (``model/confidence.py``), set by the validation split


class RunLoadError(RuntimeError):
    """A run folder, checkpoint or tokenizer that cannot be used, with the file it is about."""


def read_checkpoint(path: Path) -> dict:
    """A checkpoint's contents, read safely (tensors and plain values only) and checked: a dict with
    a ``state_dict`` of finite weights. Anything else is a ``RunLoadError`` naming the file."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 — any unreadable, truncated or unsafe file: one clear line
        raise RunLoadError(f"{path}: not a loadable checkpoint ({type(error).__name__})") from None
    if not isinstance(state, dict) or not isinstance(state.get("state_dict"), dict):
        raise RunLoadError(f"{path}: not a checkpoint of this project (no state_dict)")
    if not all(torch.isfinite(w).all() for w in state["state_dict"].values() if w.is_floating_point()):
        raise RunLoadError(f"{path}: weights are not finite (NaN or inf): the training diverged")
    return state


def model_config(state: dict, path: Path) -> dict:
    """The ``Seq2SeqTransformer`` arguments a checkpoint was trained with (plain values)."""
    hparams = state.get("hyper_parameters")
    if not isinstance(hparams, dict) or not isinstance(hparams.get("model_config"), dict):
        raise RunLoadError(f"{path}: not a checkpoint of this project (no model_config)")
    return dict(hparams["model_config"])


def find_checkpoint(run: str | Path) -> tuple[Path, dict]:
    """A checkpoint file as given, or the first usable one in ``<run>/checkpoints/`` in the order
    final, best, last; an unusable one is skipped with a warning. Returns the path and contents."""
    run = Path(run)
    if not run.exists():
        raise RunLoadError(f"{run}: no such run folder or checkpoint")
    problem = None
    for path in [run] if run.is_file() else (run / "checkpoints" / name for name in CHECKPOINT_PREFERENCE):
        if not path.is_file():
            continue
        try:
            state = read_checkpoint(path)
            model_config(state, path)
            return path, state
        except RunLoadError as error:
            if path == run:  # named: refused, never passed over
                raise
            log.warning("%s; trying the next checkpoint", error)
            problem = error
    raise problem or RunLoadError(
        f"{run / 'checkpoints'}: no checkpoint (expected one of {', '.join(CHECKPOINT_PREFERENCE)})")


def open_run(run: str | Path) -> tuple[RunFiles, dict]:
    """A run (folder or checkpoint file): which checkpoint, its folder and settings, and the checkpoint's
    contents, read once (``find_checkpoint``)."""
    checkpoint, state = find_checkpoint(run)
    folder = run_folder_of(checkpoint)
    return RunFiles(checkpoint, folder, run_settings(folder)), state


def run_folder_of(checkpoint: Path) -> Path:
    """The run folder of a checkpoint: where ``tokenizer.json`` sits, its grandparent (or its folder)."""
    for folder in (checkpoint.parent.parent, checkpoint.parent):
        if (folder / JOINT_FILE).is_file() or (folder / SRC_FILE).is_file():
            return folder
    raise RunLoadError(f"{checkpoint.parent.parent / JOINT_FILE}: tokenizer missing for checkpoint {checkpoint}")


@dataclass(frozen=True)
class RunSettings:
    """What translating needs of the run's ``config.yaml``: its search, its source-length limit, its language
    pair and where its corpus came from."""

    search: SearchConfig = SearchConfig()
    max_sentence_len: int | None = None  # None: the model's own limit
    pair: LanguagePair = LanguagePair()  # English→Spanish for a run from before the pair was a setting
    corpus: str | None = None  # a hub dataset's path or a corpus file's name; None: the pair's Tatoeba download
    init_from: str | None = None  # the run a fine-tune started from (``init_from=``); None: trained from scratch

    def source_limit(self, model_max_len: int) -> int:
        """Source tokens read (its end-of-sentence kept): the run's limit, never above the model's positions."""
        return min(self.max_sentence_len or model_max_len, model_max_len)


@dataclass(frozen=True)
class RunFiles:
    """Where a run's files are: the checkpoint chosen, its run folder, and the settings it was trained with."""

    checkpoint: Path
    folder: Path
    settings: RunSettings


def run_settings(run_folder: Path) -> RunSettings:
    """``module.search`` and ``data.*`` of ``<run_folder>/config.yaml``; defaults for what it lacks (a folder
    without one, or from an older version)."""
    path = run_folder / "config.yaml"
    if not path.is_file():
        return RunSettings()
    import yaml  # PyYAML, which Hydra and OmegaConf already need

    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        search, data = (config.get("module") or {}).get("search") or {}, config.get("data") or {}
        known = {f.name for f in dataclasses.fields(SearchConfig)}
        corpus = data.get("hub_path") or (Path(data["corpus_path"]).name if data.get("corpus_path") else None)
        settings = RunSettings(SearchConfig(**{k: v for k, v in search.items() if k in known}),
                               data.get("max_sentence_len"), pair_of(data), corpus, config.get("init_from"))
    except (yaml.YAMLError, AttributeError, TypeError, ValueError) as error:
        raise RunLoadError(f"{path}: unreadable run settings ({str(error).splitlines()[0][:120]})") from None
    return settings


def read_calibration(run_folder: Path) -> Calibration | None:
    """The run's ``confidence.json`` (None for a run from before it was written: scores, and marks from flags only;
    without its ``combination``, from before the agreement: marks from the score alone)."""
    path = run_folder / CALIBRATION_FILE
    if not path.is_file():
        return None
    import json
    import math

    try:
        values = json.loads(path.read_text(encoding="utf-8"))
        combination = values.pop("combination", None)  # absent from a file written before the agreement
        combination = Combination(**combination) if combination is not None else None
        calibration = Calibration(**values, combination=combination)
        numbers = [*values.values(), *(vars(combination).values() if combination else ())]
        if not all(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                   for value in numbers):
            raise ValueError("finite numbers expected")
    except (ValueError, TypeError, AttributeError) as error:  # AttributeError: not a JSON object
        raise RunLoadError(f"{path}: unreadable calibration ({str(error).splitlines()[0][:120]}); "
                           f"write it again: python scripts/calibrate.py") from None
    return calibration


def run_tokenizer(files: RunFiles, state: dict) -> TranslationTokenizer:
    """The run's tokenizer, refused unless it is the one the checkpoint was trained with."""
    try:
        tokenizer = TranslationTokenizer.load(files.folder)
    except Exception as error:  # noqa: BLE001 — tokenizers raises plain Exceptions on a corrupt file
        raise RunLoadError(f"{files.folder / JOINT_FILE}: unusable tokenizer "
                           f"({str(error).splitlines()[0][:120]})") from None
    config = model_config(state, files.checkpoint)
    expected = state["hyper_parameters"].get("tokenizer_sha256")
    sizes, trained = (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size), (config.get("src_vocab_size"),
                                                                              config.get("tgt_vocab_size"))
    if sizes != trained or (expected and expected != tokenizer_fingerprint(files.folder)):
        raise RunLoadError(f"{files.folder / JOINT_FILE}: tokenizer does not match checkpoint {files.checkpoint} "
                           f"(vocabulary {sizes} vs {trained})")
    return tokenizer


def run_model(files: RunFiles, state: dict) -> Seq2SeqTransformer:
    """The checkpoint's model, its weights loaded (on the CPU)."""
    try:
        model = Seq2SeqTransformer(**model_config(state, files.checkpoint))
        model.load_state_dict({k.removeprefix("model."): v for k, v in state["state_dict"].items()})
    except (TypeError, ValueError, RuntimeError) as error:
        raise RunLoadError(f"{files.checkpoint}: its weights do not fit its model_config "
                           f"({str(error).splitlines()[0][:160]})") from None
    return model


def overridden(settings: RunSettings, overrides: dict) -> RunSettings:
    """The run's settings with a caller's: ``max_sentence_len`` or any ``SearchConfig`` field (checked here, once)."""
    overrides = dict(overrides)
    max_sentence_len = overrides.pop("max_sentence_len", settings.max_sentence_len)
    return replace(settings, search=replace(settings.search, **overrides), max_sentence_len=max_sentence_len)
