"""The training callback that draws attention at every validation: PNG grids, the explorer page,
statistics, and the same in wandb (or TensorBoard).

Side outputs of training live here, not in the LightningModule: the module hands over
``sentence_views(n)`` (fixed validation sentences, translated now), this callback writes them.
"""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L

from model.views import SentenceView
from model.views.explorer import read_steps, sentence_record, write_explorer
from model.views.plotting import attention_figures, save_figure
from model.views.statistics import attention_statistics


class AttentionViews(L.Callback):
    """At each validation, the attention of ``sentences`` fixed validation sentences, as the model
    translates them now:

    - ``<run>/attention/step_<N>/<kind>_sentence<n>.png`` (wandb: ``attention/<kind>/sentence_<n>``,
      one panel with a step slider) and this step's weights, ``attention.json``;
    - ``<run>/attention/explorer.html``, rebuilt from every step so far (wandb: ``attention/explorer``);
    - ``attention_<kind>/<stat>[_L<layer>H<head>]`` scalars (``model/views/statistics.py``).
    """

    def __init__(self, sentences: int = 3) -> None:
        if sentences < 0:
            raise ValueError(f"sentences must be 0 or more, got {sentences}")
        self.sentences = sentences

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero or not self.sentences:
            return
        views = pl_module.sentence_views(self.sentences)
        self.write(views, Path(trainer.default_root_dir) / "attention", trainer.global_step, trainer.loggers)
        pl_module.log_dict(attention_statistics([view.attention for view in views]), rank_zero_only=True)

    @staticmethod
    def write(views: list[SentenceView], root: Path, step: int, loggers: list) -> None:
        """This step's pictures and weights under ``root/step_<N>/``, and the explorer of every step."""
        folder = root / f"step_{step:06d}"
        folder.mkdir(parents=True, exist_ok=True)
        for n, view in enumerate(views):
            for kind, figure in attention_figures(view, caption=f" · step {step} · rows = queries").items():
                path = folder / f"{kind}_sentence{n}.png"
                save_figure(figure, path)
                log_image(loggers, f"attention/{kind}/sentence_{n}", path, step)
        record = {"label": f"step {step}", "step": step, "sentences": [sentence_record(view) for view in views]}
        (folder / "attention.json").write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
        explorer = write_explorer(root / "explorer.html", read_steps(root), "Attention during training")
        log_html(loggers, "attention/explorer", explorer, step)


def log_image(loggers: list, key: str, path: Path, step: int) -> None:
    """A PNG to wandb (an image panel with a step slider) or TensorBoard; other loggers have the file."""
    for logger in loggers:
        if type(logger).__name__ == "WandbLogger":
            logger.log_image(key=key, images=[str(path)], step=step)
        elif type(logger).__name__ == "TensorBoardLogger":
            import matplotlib.image as mpimg

            logger.experiment.add_image(key, mpimg.imread(path)[..., :3], step, dataformats="HWC")


def log_html(loggers: list, key: str, path: Path, step: int) -> None:
    """A page to wandb's HTML panel."""
    for logger in loggers:
        if type(logger).__name__ == "WandbLogger":
            import wandb

            # inject=False: no stylesheet fetched from wandb's servers; the page stays offline.
            logger.log_metrics({key: wandb.Html(path.read_text(encoding="utf-8"), inject=False)}, step=step)
