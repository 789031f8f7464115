"""Train a translation Transformer (English→Spanish unless ``data.source_lang`` / ``data.target_lang`` say
otherwise): Hydra composes the config, Lightning trains.

Common runs:

    python train.py                                  # the default: the GPU recipe where CUDA is found, else the CPU's
    python train.py experiment=cpu                   # the recipe for a 2-core CPU, ~30 min (the default without CUDA)
    python train.py experiment=gpu                   # one GPU, 10 minutes: base-size model, bf16, batches on the GPU
    python train.py experiment=smoke                 # a minute: tiny model, data slice (what the tests run)
    python train.py data.source_lang=es data.target_lang=en                       # Spanish→English, same corpus
    python train.py data.target_lang=nl data.corpus_path=path/to/nld-eng.zip       # English→Dutch
    python train.py trainer=ddp                      # every GPU of the node, Lightning DDP
    python train.py trainer=ddp trainer.accelerator=cpu trainer.devices=2 experiment=smoke   # DDP on a CPU
    python train.py logger=csv runtime.max_time=00:00:05:00 model.d_model=128
    python train.py hydra.run.dir=outputs/my_run     # a named run folder; run it again to resume it
    python train.py ckpt_path=outputs/x/checkpoints/last.ckpt   # resume from a given checkpoint
    python train.py experiment=finetune init_from=outputs/x data.corpus_path=mine.tsv   # fine-tune a run on your data

The run folder (``outputs/<date_time>`` unless ``hydra.run.dir`` says otherwise) gets the
resolved ``config.yaml``, ``tokenizer.json``, ``checkpoints/{best,last,final}.ckpt``, metrics
(``csv/``, ``wandb/``, ``test_metrics.json``), the attention maps (``attention/step_*/``,
``attention/explorer.html``) and ``time_split.json``: where the run's time went (also one line
in the log). Everything ``translate.py`` needs. What makes the run safe to stop and cheap to
watch (time limit, signals, resume, the non-finite guard, the time split) is ``runtime/``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import hydra
import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

import runtime
from data.corpus import CorpusError, CorpusNotFoundError
from data.cache import DataCacheError
from data.tokenizer import tokenizer_fingerprint
from runtime.config_checks import check_command_line
from runtime.machine import with_recipe
from runtime.non_finite import NonFiniteLossError
from runtime.settings import SettingsError, first_rank
from runtime.stop_and_clock import CheckpointWriteError, TrainingInterrupted

log = logging.getLogger("train")


def train(cfg: DictConfig) -> dict[str, float]:
    """Build data, model, module, callbacks, loggers and trainer from a composed config; train, then test.

    Everything lands in ``cfg.paths.output_dir``. Returns the final metrics (validation and, with
    ``cfg.test``, test). Tests call this directly; ``main`` is the command-line wrapper. Bad settings
    raise ``SettingsError`` before anything is built (``runtime.attach``).
    """
    with runtime.attach(cfg) as run:  # init_from= read into cfg, the machine decided, the settings checked
        L.seed_everything(cfg.seed, workers=True, verbose=False)
        # plain lists and dicts: checkpoints load weights_only; the teacher's alignments only for an aligned head
        datamodule = instantiate(cfg.data, word_alignments=cfg.module.alignment_weight > 0, _convert_="all")
        with run.clock.phase("data"):
            datamodule.setup()  # builds (or reads from the cache) splits, tokenizer and token ids
        with open_dict(cfg):  # vocabulary and special ids flow from the data into the model
            cfg.model.src_vocab_size = datamodule.src_vocab_size
            cfg.model.tgt_vocab_size = datamodule.tgt_vocab_size
            cfg.model.pad_id = datamodule.special_ids["pad_id"]
        # Kept in the checkpoint (plain values, no _target_) so translate.py can rebuild the model.
        model_config = {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k != "_target_"}
        run.check_folder(model_config, datamodule.tokenizer_folder)
        run_dir = Path(cfg.paths.output_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        model = instantiate(cfg.model)
        run.start_from(model)  # init_from=: the starting run's weights, unless this run resumes
        datamodule.tokenizer.save(run_dir)
        module = instantiate(cfg.module, model=model, optimizer=instantiate(cfg.optim.optimizer),
                             model_config=model_config, tokenizer_sha256=tokenizer_fingerprint(run_dir),
                             **run.module_parts, _convert_="all")
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        loggers = run.loggers()
        for logger in loggers:
            logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
        # A preset switches a callback off with null (experiment=gpu: no early stopping).
        callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c is not None]
        trainer = instantiate(cfg.trainer, logger=loggers or False, default_root_dir=str(run_dir),
                              **run.trainer_parts(callbacks))
        log.info("%s model: %.1fM parameters; run folder: %s", datamodule.pair.describe(),
                 sum(p.numel() for p in model.parameters()) / 1e6, run_dir)
        run.fit(trainer, module, datamodule)
        if cfg.get("optimized_metric"):  # a search's objective: the final weights, not the last validation's
            trainer.validate(module, datamodule=datamodule, weights_only=True, verbose=False)
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
        if cfg.test:  # the configured search (beam) on the test split, final weights
            results = trainer.test(module, datamodule=datamodule, weights_only=True)
            metrics.update(results[0] if results else {})
        return metrics


def objective(cfg: DictConfig, metrics: dict[str, float]) -> float | dict[str, float]:
    """What a run returns: the metric ``optimized_metric`` names (a search's objective), else all of them."""
    name = cfg.get("optimized_metric")
    if not name:
        return metrics
    if name not in metrics:
        raise SettingsError(f"optimized_metric={name} was not logged (logged: {', '.join(sorted(metrics))})")
    return metrics[name]


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> float | dict[str, float]:
    with stops_in_one_line(search=bool(cfg.get("optimized_metric"))):
        return objective(cfg, train(cfg))


STOPS_WITH_ONE_LINE = (SettingsError, CorpusError, CorpusNotFoundError, CheckpointWriteError, DataCacheError)


@contextmanager
def stops_in_one_line(search: bool = False) -> Iterator[None]:
    """What stops a run, said in one ``train.py:`` line with the shell's exit code; in a ``search`` a
    non-finite loss is raised on (the sweeper records the trial as failed and goes on)."""
    try:
        yield
    except NonFiniteLossError as error:
        if search:
            raise
        raise SystemExit(f"train.py: {error}") from None
    except STOPS_WITH_ONE_LINE as error:  # an OSError's own words, without its errno (one made of a message alone: its message)
        raise SystemExit(f"train.py: {getattr(error, 'strerror', None) or error}") from None
    except TrainingInterrupted as stop:
        if first_rank():  # every rank stopped and saved together: one line says it
            print(f"train.py: {stop}", file=sys.stderr)
        raise SystemExit(128 + stop.signum) from None  # 130 for Ctrl-C, 143 for SIGTERM, as shells report them
    except KeyboardInterrupt:  # before training started or after it ended: nothing of a step to save
        print("train.py: interrupted", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    try:  # before Hydra composes or writes anything; then the recipe for this machine (experiment=gpu with CUDA)
        check_command_line(sys.argv[1:], Path(__file__).resolve().parent / "configs")
    except SettingsError as error:
        sys.exit(f"train.py: {error}")
    sys.argv[1:] = with_recipe(sys.argv[1:])
    main()
