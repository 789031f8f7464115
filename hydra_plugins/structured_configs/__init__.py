"""Config nodes built from the code's own defaults, so that no yaml repeats them.

``module/search/default``: ``model.search.SearchConfig`` with its defaults, the node
``configs/module/translation.yaml`` takes as ``module.search`` (overrides such as
``module.search.beam_size=8`` work as on any yaml node). Hydra imports this package whenever it
starts (``hydra_plugins`` is where it looks for plugins), before it composes a config.
"""

from dataclasses import asdict

from hydra.core.config_store import ConfigStore

from model.search import SearchConfig

ConfigStore.instance().store(group="module/search", name="default",
                             node={"_target_": "model.search.SearchConfig", **asdict(SearchConfig())})
