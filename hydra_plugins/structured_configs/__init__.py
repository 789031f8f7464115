"""Config nodes built from the code's own defaults, so that no yaml repeats them: ``module/search/default``
(``SearchConfig()``, ``module.search`` in ``configs/module/translation.yaml``). Hydra imports this package, where it
looks for plugins, before it composes a config.
"""

from dataclasses import asdict

from hydra.core.config_store import ConfigStore

from model.search import SearchConfig

ConfigStore.instance().store(group="module/search", name="default",
                             node={"_target_": "model.search.SearchConfig", **asdict(SearchConfig())})
