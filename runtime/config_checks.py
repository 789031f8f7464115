"""``train.py``'s settings refused in one line before anything is built or written: the command line before Hydra
composes it, then the composed config, each component saying what it refuses (``shape_problems``, ``data_problems``,
``runtime_problems``, ...): one rule, one place; gathered here into one line."""

from pathlib import Path

from omegaconf import DictConfig

from data.data_settings import data_problems
from model.inference.run_folder import RunLoadError, read_checkpoint
from model.search import SearchConfig
from model.training.aligned_head import aligned_index
from model.training.schedule import schedule_problems
from model.training.translation_module import module_problems
from model.transformer import shape_problems
from runtime.settings import SettingsError, refuse_finished_run, runtime_problems

OURS = ("max_time", "precision")  # the run machinery's keys, which Lightning's Trainer also has
OURS_UNDER_TRAINER = "trainer.{0} is not Lightning's here: set runtime.{0}"


def check_config(cfg: DictConfig) -> None:
    """Refuse in one line settings that would fail after the data cache is built or mid-epoch."""
    model, data, module = cfg.model, cfg.data, cfg.module
    problems = (shape_problems(model, "model.") + data_problems(data, "data.") + module_problems(module, "module.")
                + schedule_problems(module.schedule, "module.schedule.") + runtime_problems(cfg.runtime, "runtime."))
    try:
        SearchConfig(**{k: v for k, v in module.search.items() if k != "_target_"})
    except (TypeError, ValueError) as error:
        problems.append(f"module.search.{error}")
    problems += [OURS_UNDER_TRAINER.format(key) for key in OURS if key in cfg.trainer] + ckpt_path_problems(cfg)
    if data.get("replay") and not cfg.get("init_from"):  # experiment=finetune without a run to start from
        problems.append(f"data.replay={data.replay} mixes in a starting run's corpus: give the run, init_from=...")
    average = (cfg.get("callbacks") or {}).get("weight_averaging") or {}
    if "decay" in average and not (isinstance(average.decay, float) and 0 < average.decay < 1):
        problems.append(f"callbacks.weight_averaging.decay={average.decay!r} must be between 0 and 1")
    if not problems and data.max_sentence_len > model.max_len:
        problems.append(f"data.max_sentence_len={data.max_sentence_len} exceeds model.max_len={model.max_len}")
    if not problems and module.get("alignment_weight"):  # the aligned head must exist
        heads = model.num_heads if model.get("cross_attention", True) else 0
        try:
            aligned_index(model.num_decoder_layers, heads, module.get("aligned_layer"), module.get("aligned_head", 1))
        except ValueError as error:
            problems.append(str(error))
    if problems:
        raise SettingsError("bad settings: " + "; ".join(problems))


def ckpt_path_problems(cfg: DictConfig) -> list[str]:
    """``ckpt_path=``, if given, must load safely (``weights_only``: never unpickled)."""
    if not cfg.get("ckpt_path"):
        return []
    if not Path(cfg.ckpt_path).is_file():
        return [f"ckpt_path={cfg.ckpt_path} does not exist"]
    try:
        read_checkpoint(Path(cfg.ckpt_path))
    except RunLoadError as error:
        return [f"ckpt_path: {error}"]
    return []


def check_command_line(argv: list[str], configs: Path) -> None:
    """Refuse before Hydra writes anything: a missing option of a config group (``experiment=nope``, or one of a
    sweep's ``a,b``), a key of ours under ``trainer.`` (Hydra would advise ``+trainer.max_time``), a finished run."""
    for arg in argv:
        key, _, value = arg.partition("=")
        key, group = key.lstrip("+~"), configs / key.lstrip("+~")
        if key.startswith("trainer.") and key[8:] in OURS:
            raise SettingsError("bad settings: " + OURS_UNDER_TRAINER.format(key[8:]))
        if key == "hydra.run.dir":
            refuse_finished_run(Path(value))
        if arg.startswith("-") or not value or value == "null" or "(" in value or not group.is_dir():
            continue
        choices = sorted(path.stem for path in group.glob("*.yaml"))
        for choice in value.split(","):
            if choice not in choices:
                raise SettingsError(f"{key}={choice}: no such option in configs/{group.name}/ "
                                    f"(choices: {', '.join(choices)})")
