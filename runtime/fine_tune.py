"""``train.py init_from=RUN`` (read by ``runtime.attach``): a new run that starts from a trained run's weights, with
its tokenizer, copy-slot rules and model shape, on another corpus, the starting run's corpus mixed back in
(``data.replay``). Decided here, once: which checkpoint, the shape (a command-line ``model.`` key that would change it
is refused, dropouts excepted), the pair (the same, or refused), the tokenizer and the original corpus."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from data.data_settings import CORPUS_KEYS
from data.languages import pair_of
from model.inference.run_folder import RunLoadError, open_run
from runtime.settings import SettingsError

log = logging.getLogger("train")


@dataclass(frozen=True)
class StartingRun:
    """The trained run a fine-tune starts from: its checkpoint and the weights of its model."""

    checkpoint: Path
    weights: dict[str, torch.Tensor]

    def load_into(self, model: torch.nn.Module, resumes: bool) -> None:
        """The starting weights into ``model``, unless the run ``resumes`` from a checkpoint of its own."""
        if resumes:
            log.info("a fine-tune resumes from its own checkpoint (started from %s)", self.checkpoint)
            return
        model.load_state_dict(self.weights)
        log.info("fine-tuning from %s", self.checkpoint)


def command_line_keys() -> set[str]:
    """The keys the command line set (Hydra's overrides), or none outside a Hydra run (a test's ``train(cfg)``)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return set()
    return {override.partition("=")[0].lstrip("+~") for override in HydraConfig.get().overrides.task}


def starting_run(cfg: DictConfig) -> StartingRun | None:
    """``cfg`` made a fine-tune of ``cfg.init_from`` (shape, tokenizer, original corpus), or None without it;
    a run that cannot be fine-tuned this way is a ``SettingsError`` in one line."""
    if not cfg.get("init_from"):
        return None
    try:
        files, state = open_run(cfg.init_from)
    except RunLoadError as error:
        raise SettingsError(f"init_from: {error}") from None
    base = OmegaConf.load(files.folder / "config.yaml") if (files.folder / "config.yaml").is_file() else None
    if base is None:
        raise SettingsError(f"init_from={cfg.init_from}: {files.folder} holds no config.yaml (not a run folder)")
    started, wanted = pair_of(base.data), pair_of(cfg.data)
    if started != wanted:
        raise SettingsError(f"init_from={cfg.init_from} translates {started.describe()}, this run {wanted.describe()}: "
                            f"a fine-tune keeps its starting run's pair (data.source_lang / data.target_lang)")
    shape = state["hyper_parameters"]["model_config"]
    changed = sorted(key for key in command_line_keys() if key.startswith("model.")
                     and "dropout" not in key and cfg.model.get(key[6:]) != shape.get(key[6:]))
    if changed:
        raise SettingsError(f"init_from={cfg.init_from}: {', '.join(changed)} would change the shape of its model; "
                            f"a fine-tune keeps it (dropouts may change)")
    with open_dict(cfg):
        for key, value in shape.items():
            if "dropout" not in key:
                cfg.model[key] = value
        cfg.data.tokenizer_from = str(files.folder)
        cfg.data.original = {k: base.data[k] for k in CORPUS_KEYS if k in base.data}
    weights = {k.removeprefix("model."): v for k, v in state["state_dict"].items()}
    return StartingRun(files.checkpoint, weights)
