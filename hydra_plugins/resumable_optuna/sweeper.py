"""Hydra's Optuna sweeper, made to resume: ``python train.py -m hparams_search=recipe`` run again continues the search.

The stock sweeper reloads a stored study, then runs ``n_trials`` *more*, numbering folders from 0 again over the old
ones. Here ``n_trials`` counts the whole search, a trial left running by an interrupted search runs again first (its
old folder kept), each trial's folder is its Optuna trial number, and ``trials.md`` in the sweep folder lists every
trial. Hydra loads sweepers only from the ``hydra_plugins`` package: hence this folder. Without the optional
``search`` dependencies (hydra-optuna-sweeper) this module defines nothing.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List  # OmegaConf reads the dataclass's annotations: typing's forms

from hydra.core.config_store import ConfigStore

try:
    import optuna
    from hydra_plugins.hydra_optuna_sweeper import _impl as stock
    from hydra_plugins.hydra_optuna_sweeper.config import OptunaSweeperConf
    from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
except ImportError:  # pip install -e ".[search]" for hparams_search=...
    OptunaSweeper = None

if OptunaSweeper is not None:
    ENDED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL, optuna.trial.TrialState.PRUNED)

    class ResumableSearch(stock.OptunaSweeperImpl):
        """The stock search loop, started from what the study's storage already holds."""

        def __init__(self, enqueue: list[dict[str, Any]], **settings: Any) -> None:
            super().__init__(**settings)
            self.enqueue = enqueue

        def sweep(self, arguments: list[str]) -> None:
            if self.storage is None:  # an in-memory study: nothing to resume
                return super().sweep(arguments)
            sweep_dir = Path(str(self.config.hydra.sweep.dir))
            sweep_dir.mkdir(parents=True, exist_ok=True)  # the database may live in it
            study = optuna.create_study(study_name=self.study_name, storage=self.storage,
                                        directions=self._get_directions(), load_if_exists=True)
            ended = sum(trial.state in ENDED for trial in study.trials)
            stale = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
            for trial in stale:  # left running by an interrupted search: run its settings again
                study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
            next_number = len(study.trials)
            for trial in stale:
                study.enqueue_trial(trial.params)
            for params in self.enqueue if not study.trials else ():  # a new study: its given first trials
                study.enqueue_trial(dict(params))
            if ended or stale:
                if hasattr(self.sampler, "reseed_rng"):  # else a seeded sampler repeats its first suggestions
                    self.sampler.reseed_rng()
                stock.log.info(f"Resuming study {study.study_name}: {ended} trials ended, {len(stale)} interrupted "
                               f"(run again), {max(0, self.n_trials - ended)} to go")
            self.n_trials = max(0, self.n_trials - ended)
            self.job_idx = next_number  # the stock loop numbers run folders from here: Optuna's trial numbers
            try:
                if self.n_trials or any(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials):
                    super().sweep(arguments)  # with nothing to go, it reports the best trial
            finally:
                write_trial_table(study, sweep_dir / "trials.md")

    class ResumableOptunaSweeper(OptunaSweeper):
        """``hydra/sweeper=resumable_optuna``: a search that picks up where an interrupted one stopped."""

        def __init__(self, **settings: Any) -> None:
            self.sweeper = ResumableSearch(**settings)

    @dataclass
    class ResumableOptunaSweeperConf(OptunaSweeperConf):
        """The stock sweeper's settings, plus ``enqueue``: trials a new study runs first (e.g. today's default)."""

        _target_: str = f"{__name__}.ResumableOptunaSweeper"
        enqueue: List[Dict[str, Any]] = field(default_factory=list)

    ConfigStore.instance().store(group="hydra/sweeper", name="resumable_optuna", node=ResumableOptunaSweeperConf,
                                 provider="resumable_optuna")


def write_trial_table(study: Any, path: Path) -> None:
    """Every trial of ``study`` (Optuna's own table, as Markdown), best objective first, failed trials last."""
    table = study.trials_dataframe(attrs=("number", "state", "value", "params"))
    if len(table):  # (an empty study's table has no columns to sort by)
        table = table.sort_values("value", ascending=study.direction != optuna.study.StudyDirection.MAXIMIZE,
                                  na_position="last").round({"value": 2})
    path.write_text(f"# {study.study_name}: {len(table)} trials\n\n{table.to_markdown(index=False)}\n")
