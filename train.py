"""Train the English→Spanish Transformer: Hydra composes the config, Lightning trains.

Common runs:

    python train.py                                  # the default: best this 2-core CPU does in ~30 min
    python train.py experiment=smoke                 # a minute: tiny model, data slice (what the tests run)
    python train.py experiment=gpu_base              # one GPU: base-size model, bf16, 10 minutes
    python train.py trainer=ddp                      # every GPU of the node, Lightning DDP
    python train.py trainer=ddp trainer.accelerator=cpu trainer.devices=2 experiment=smoke   # DDP on a CPU
    python train.py logger=csv trainer.max_time=00:00:05:00 model.d_model=128
    python train.py hydra.run.dir=outputs/my_run     # a named run folder; run it again to resume it
    python train.py ckpt_path=outputs/x/checkpoints/last.ckpt   # resume from a given checkpoint

The run folder (``outputs/<date_time>`` unless ``hydra.run.dir`` says otherwise) gets the
resolved ``config.yaml``, ``tokenizer.json``, ``checkpoints/{best,last}.ckpt``, metrics
(``csv/``, ``wandb/``, ``test_metrics.json``) and the attention maps (``attention/step_*/``):
everything ``translate.py`` needs.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from data.tokenizer import tokenizer_fingerprint
from model.precision import choose_precision

log = logging.getLogger("train")


def resume_checkpoint(cfg: DictConfig, run_dir: Path) -> str | None:
    """The checkpoint to resume from: ``ckpt_path=`` if given, else this run folder's last.ckpt."""
    if cfg.ckpt_path:
        if not Path(cfg.ckpt_path).is_file():
            raise FileNotFoundError(f"ckpt_path={cfg.ckpt_path} does not exist")
        return str(cfg.ckpt_path)
    last = run_dir / "checkpoints" / "last.ckpt"
    if last.is_file():
        log.info("resuming the interrupted run from %s", last)
        return str(last)
    return None


def train(cfg: DictConfig) -> dict[str, float]:
    """Build data, model, module, loggers and trainer from a composed config; train, then test.

    Everything lands in ``cfg.paths.output_dir``. Returns the final metrics (validation and,
    with ``cfg.test``, test). Tests call this directly; ``main`` is the command-line wrapper.
    """
    L.seed_everything(cfg.seed, workers=True)
    run_dir = Path(cfg.paths.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)

    datamodule = instantiate(cfg.data)
    datamodule.setup()  # builds (or reads from the cache) splits, tokenizer and token ids
    with open_dict(cfg):  # vocabulary and special ids flow from the data into the model
        cfg.model.src_vocab_size = datamodule.src_vocab_size
        cfg.model.tgt_vocab_size = datamodule.tgt_vocab_size
        cfg.model.pad_id = datamodule.special_ids["pad_id"]
        if cfg.trainer.precision == "auto":  # bf16 autocast only where it is faster (model/precision.py)
            cfg.trainer.precision = choose_precision(cfg.trainer.accelerator)
    # Kept in the checkpoint (plain values, no _target_) so translate.py can rebuild the model.
    model_config = {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k != "_target_"}
    model = instantiate(cfg.model)
    datamodule.tokenizer.save(run_dir)
    module = instantiate(cfg.module, model=model, optimizer=instantiate(cfg.optim.optimizer),
                         model_config=model_config, tokenizer_sha256=tokenizer_fingerprint(run_dir), _convert_="all")
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    loggers = [instantiate(c) for c in cfg.logger.values()] if cfg.get("logger") else []
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
    callbacks = [instantiate(c) for c in cfg.callbacks.values()] if cfg.get("callbacks") else []
    trainer = instantiate(cfg.trainer, logger=loggers or False, callbacks=callbacks, default_root_dir=str(run_dir))
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model: %.1fM parameters; run folder: %s", n_params / 1e6, run_dir)

    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=resume_checkpoint(cfg, run_dir))
        # The weights as training left them (a time limit rarely stops on a validation step).
        trainer.save_checkpoint(run_dir / "checkpoints" / "final.ckpt", weights_only=True)
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
        if cfg.test:  # the configured search (beam) on the test split, final weights
            results = trainer.test(module, datamodule=datamodule)
            metrics.update(results[0] if results else {})
    finally:
        finish_wandb_run()
    return metrics


def finish_wandb_run() -> None:
    """Close the wandb run, so that the next ``train`` in this process (a sweep, a test) starts its own."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> dict[str, float]:
    return train(cfg)


if __name__ == "__main__":
    main()
