"""The recipe search (configs/hparams_search/recipe.yaml) and its resumable Optuna sweeper
(hydra_plugins/resumable_optuna/sweeper.py): it composes, starts from today's default, resumes."""

import re
import subprocess
import sys

import optuna
import pytest
from hydra import compose, initialize_config_dir
from hydra_plugins.hydra_optuna_sweeper._impl import create_params_from_overrides
from omegaconf import OmegaConf

from helpers import NO_VIEWS, ROOT
from train import SettingsError, objective

SEARCH = ["hparams_search=recipe"]


def compose_search(*overrides: str):
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose(config_name="train", overrides=[*SEARCH, *overrides], return_hydra_config=True)


def test_the_search_composes_with_its_storage_in_the_sweep_folder():
    cfg = compose_search("hydra.sweep.dir=/tmp/somewhere")
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_ == "hydra_plugins.resumable_optuna.sweeper.ResumableOptunaSweeper"
    assert sweeper.storage == "sqlite:////tmp/somewhere/optuna.db"
    assert cfg.hydra.mode.name == "MULTIRUN" and sweeper.direction == "maximize"
    assert cfg.optimized_metric == "val/bleu" and cfg.test is False  # validation only: never the test split
    assert cfg.runtime.max_time == "00:00:08:00"


def test_the_first_trial_is_the_composed_default_and_lies_in_the_search_space():
    cfg = compose_search()
    default = OmegaConf.to_container(compose_search().hydra.sweeper.enqueue, resolve=True)[0]
    space, fixed = create_params_from_overrides([f"{k}={v}" for k, v in cfg.hydra.sweeper.params.items()])
    assert not fixed and set(default) == set(space)  # every searched setting has a default to start from
    plain = OmegaConf.to_container(cfg, resolve=False)
    for name, value in default.items():
        section, *path = name.split(".")
        expected = plain[section]
        for key in path:
            expected = expected[key]
        assert value == expected, name  # the interpolation reads today's default
        distribution = space[name]
        if isinstance(distribution, optuna.distributions.CategoricalDistribution):
            assert value in distribution.choices, name
        else:
            assert distribution.low <= value <= distribution.high, name


def test_a_run_returns_the_metric_the_search_optimizes():
    metrics = {"val/bleu": 31.5, "val/loss": 2.0}
    assert objective(OmegaConf.create({"optimized_metric": None}), metrics) == metrics
    assert objective(OmegaConf.create({"optimized_metric": "val/bleu"}), metrics) == 31.5
    with pytest.raises(SettingsError, match="optimized_metric=val/nope was not logged"):
        objective(OmegaConf.create({"optimized_metric": "val/nope"}), metrics)


def run_search(sweep_dir, data_cache, corpus_path, n_trials: int) -> subprocess.CompletedProcess:
    """A smoke-sized search: tiny budgets, the recipe's search space, no enqueued default."""
    command = [sys.executable, str(ROOT / "train.py"), *SEARCH, "experiment=smoke", "logger=csv",
               f"hydra.sweep.dir={sweep_dir}", f"hydra.sweeper.n_trials={n_trials}", "hydra.sweeper.enqueue=[]",
               "trainer.max_steps=4", f"data.cache_dir={data_cache}", f"data.corpus_path={corpus_path}", NO_VIEWS,
               # The smoke run's shape and vocabulary (its data cache, no BPE per trial); the rest of the space searched.
               "data.vocab_size=choice(500)", "data.max_tokens=choice(1024)", "model.d_model=choice(32)",
               "model.d_ff=choice(64)", "model.num_encoder_layers=choice(1)", "model.num_decoder_layers=choice(1)"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def test_a_two_trial_search_resumes_after_an_interruption(tmp_path, data_cache, corpus_path):
    sweep_dir = tmp_path / "search"
    run_search(sweep_dir, data_cache, corpus_path, n_trials=1)
    study = optuna.load_study(study_name="recipe", storage=f"sqlite:///{sweep_dir}/optuna.db")
    (first,) = study.trials
    assert first.state == optuna.trial.TrialState.COMPLETE and (sweep_dir / "trial_0" / "config.yaml").is_file()

    # What a search killed in the middle of its second trial leaves: a trial that never ended.
    stale = study.ask(fixed_distributions=first.distributions)
    result = run_search(sweep_dir, data_cache, corpus_path, n_trials=2)
    assert "1 trials ended, 1 interrupted (run again), 1 to go" in result.stdout + result.stderr

    trials = optuna.load_study(study_name="recipe", storage=f"sqlite:///{sweep_dir}/optuna.db").trials
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL", "COMPLETE"]
    assert trials[2].params == stale.params  # the interrupted settings, run again ...
    assert (sweep_dir / "trial_2" / "config.yaml").is_file()  # ... in a folder named by the trial's number
    assert not (sweep_dir / "trial_1").exists()
    table = (sweep_dir / "trials.md").read_text()
    assert "recipe: 3 trials" in table and re.search(r"\|\s+1 \| FAIL\s+\|", table)
