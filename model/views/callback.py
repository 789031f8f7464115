"""The training callback that draws attention at every validation: PNG grids, the explorer page,
statistics, and the same in wandb (or TensorBoard).

Side outputs of training live here, not in the LightningModule: the module hands over
``sentence_views(n)`` (fixed validation sentences, translated now), this callback writes them.
Drawing is slow (matplotlib grids of every layer and head). On a GPU the attention weights are
copied to the host and drawn in background processes while training goes on; the pictures reach
the loggers when they are ready, and the run waits for the last of them only when training ends.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L

from model.scoring.alignment_report import head_alignment
from model.views import SentenceView
from model.views.explorer import read_steps, sentence_record, write_explorer
from model.views.statistics import attention_statistics


def host_copy(view: SentenceView) -> SentenceView:
    """The view with its attention weights copied off the device: the drawing never touches the model's memory."""
    maps = view.attention.maps
    host_maps = type(maps)(*([w.detach().float().cpu() for w in getattr(maps, kind)]
                             for kind in ("encoder_self", "decoder_self", "cross")))
    return replace(view, attention=replace(view.attention, maps=host_maps))


EXPLORER_TITLE = "Attention during training"


def drawing_processes() -> int:
    """Processes that draw beside training: a quarter of the host's cores, 1 to 4. One process fell behind a GPU
    run's validations (a 6 x 8 grid of heads takes it about half a minute: docs/results.md, "On a GPU")."""
    return max(1, min(4, (os.cpu_count() or 1) // 4))


def render_step(pickled_views: bytes, root: str, step: int, alignment: dict | None = None) -> dict:
    """Draw one validation's views into ``root/step_<N>/`` and rebuild the explorer of every step; ``alignment``:
    each cross-attention head's AER against a gold set (``head_alignment``), shown beside each head.

    Runs in the background process (so it takes plain, picklable arguments). Returns what the
    loggers get: ``{"images": [(key, path), ...], "explorer": path}``.
    """
    from model.views.plotting import attention_figures, save_figure  # matplotlib: only where it draws

    views: list[SentenceView] = pickle.loads(pickled_views)
    folder = Path(root) / f"step_{step:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    images = []
    for n, view in enumerate(views):
        for kind, figure in attention_figures(view, caption=f" · step {step} · rows = queries").items():
            path = folder / f"{kind}_sentence{n}.png"
            save_figure(figure, path)
            images.append((f"attention/{kind}/sentence_{n}", str(path)))
    record = {"label": f"step {step}", "step": step, "sentences": [sentence_record(view) for view in views],
              **({"alignment": alignment} if alignment else {})}
    (folder / "attention.json").write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
    explorer = write_explorer(Path(root) / "explorer.html", read_steps(root), EXPLORER_TITLE)
    return {"images": images, "explorer": str(explorer)}


class AttentionViews(L.Callback):
    """At each validation, the attention of ``sentences`` fixed validation sentences, as the model
    translates them now:

    - ``<run>/attention/step_<N>/<kind>_sentence<n>.png`` (wandb: ``attention/<kind>/sentence_<n>``,
      one panel with a step slider) and this step's weights, ``attention.json``;
    - ``<run>/attention/explorer.html``, rebuilt from every step so far (wandb: ``attention/explorer``);
    - ``attention_<kind>/<stat>[_L<layer>H<head>]`` scalars (``model/views/statistics.py``).

    ``background=True`` draws in background processes (``drawing_processes()``, published in step order);
    ``False`` draws before training goes on (the run machinery picks it on a CPU, where training keeps
    every core busy and a drawing beside it slows the steps more than it saves: docs/results.md).
    ``clock``, anything with a ``phase(name)`` context (the run machinery sets its own), times what the
    training process spends here as the run's "views".
    """

    def __init__(self, sentences: int = 3, background: bool = False, clock: Any = None) -> None:
        if sentences < 0:
            raise ValueError(f"sentences must be 0 or more, got {sentences}")
        if background not in (True, False):
            raise ValueError(f"background must be true or false, got {background!r}")
        self.sentences, self.background = sentences, background
        self.render = render_step  # module-level (picklable): what the background process runs
        self.clock = clock
        self._pool: ProcessPoolExecutor | None = None
        self._pending: list[tuple[Future, int, tuple]] = []  # (drawing, step, its arguments), oldest first
        self._drawn_apart: str | None = None  # the folder that background drawings wrote into, possibly out of order

    def _timed(self):
        return self.clock.phase("views") if self.clock is not None else nullcontext()

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero or not self.sentences:
            return
        with self._timed():
            views = [host_copy(view) for view in pl_module.sentence_views(self.sentences)]
            pl_module.log_dict(attention_statistics([view.attention for view in views]), rank_zero_only=True)
            alignment = head_alignment(pl_module)
            if alignment:  # how close each head is to a person's word links, as training goes
                heads = {"": alignment["averaged"], "_best_head": alignment["best_head"]["aer"],
                         "_aligned_head": alignment.get("aligned_head", {}).get("aer")}
                pl_module.log_dict({f"val/aer_{alignment['set']}{kind}": aer for kind, aer in heads.items()
                                    if aer is not None}, rank_zero_only=True)
            self.draw(views, Path(trainer.default_root_dir) / "attention", trainer.global_step, self.background,
                      alignment)
            # What is drawn reaches the loggers now (on a CPU, this step's); a background drawing at the next
            # validation or the end: nothing of the views runs between them, on a training step's path.
            self._publish(trainer.loggers)

    def draw(self, views: list[SentenceView], root: Path, step: int, background: bool = True,
             alignment: dict | None = None) -> Future:
        """Start drawing ``views`` as step ``step`` (in the background, or now), with the heads' ``alignment``."""
        arguments = (pickle.dumps(views), str(root), step, alignment)
        if background:
            if self._pool is None:  # spawned, not forked: a clean process, whatever threads training runs
                # Niced: where training has every core (a CPU), drawing takes what training leaves idle.
                self._pool = ProcessPoolExecutor(drawing_processes(), mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=os.nice, initargs=(19,))
            drawing, self._drawn_apart = self._pool.submit(self.render, *arguments), str(root)
        else:
            drawing = self.draw_now(arguments)
        self._pending.append((drawing, step, arguments))
        return drawing

    def _publish(self, loggers: list, wait: bool = False) -> None:
        """Hand finished drawings to the loggers, in step order (all of them, waiting, with ``wait``)."""
        while self._pending and (wait or self._pending[0][0].done()):
            drawing, step, _ = self._pending.pop(0)
            drawn = drawing.result()  # a drawing that failed raises here, in the training process
            for key, path in drawn["images"]:
                log_image(loggers, key, Path(path), step)
            log_html(loggers, "attention/explorer", Path(drawn["explorer"]), step)

    def wait(self, loggers: list | None = None) -> None:
        """Every drawing done and handed to ``loggers``; the background processes ended. What they have not
        finished is drawn again at the run's own priority (training no longer needs the cores, and on a machine
        kept busy by others a niced process would barely run), side by side where the host has the cores; the
        explorer is then rebuilt once, so that drawings finished out of order all reach it."""
        try:
            unfinished = [i for i, (drawing, _, _) in enumerate(self._pending) if not drawing.done()]
            if unfinished:
                self._stop_pool()
            redrawn = self.draw_side_by_side([self._pending[i][2] for i in unfinished])
            for i, drawing in zip(unfinished, redrawn):
                self._pending[i] = (drawing, *self._pending[i][1:])
            if self._drawn_apart is not None:
                root = self._drawn_apart
                write_explorer(Path(root) / "explorer.html", read_steps(root), EXPLORER_TITLE)
            self._publish(loggers or [], wait=True)
        finally:
            self._stop_pool()
            self._drawn_apart = None

    def draw_side_by_side(self, drawings: list[tuple]) -> list[Future]:
        """``render`` of each of ``drawings`` (their arguments), in un-niced processes, or in this one for a single
        drawing or a single core: settled futures."""
        processes = min(len(drawings), drawing_processes())
        if processes <= 1:
            return [self.draw_now(arguments) for arguments in drawings]
        with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(self.render, *arguments) for arguments in drawings]
            for future in futures:
                future.result()  # a drawing that failed raises here
        return futures

    def draw_now(self, arguments: tuple) -> Future:
        """``render`` in this process: a settled future."""
        drawing = Future()
        drawing.set_result(self.render(*arguments))
        return drawing

    def _stop_pool(self) -> None:
        """End the background processes now, the drawings they are running included."""
        if self._pool is not None:
            for process in (getattr(self._pool, "_processes", None) or {}).values():  # no public way before 3.14
                process.terminate()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        with self._timed():
            self.wait(trainer.loggers)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.state.fn != "fit":  # a validation outside fit (trainer.validate): its pictures before it returns
            with self._timed():
                self.wait(trainer.loggers)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if self._pool is not None:  # what is drawn stays; what is not yet, is dropped
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool, self._pending = None, []


def wandb_loggers(loggers: list) -> list:
    """The wandb loggers among ``loggers`` (by name: wandb is imported only where it is configured)."""
    return [logger for logger in loggers if type(logger).__name__ == "WandbLogger"]


def log_image(loggers: list, key: str, path: Path, step: int) -> None:
    """A PNG to wandb (an image panel with a step slider) or TensorBoard; other loggers have the file."""
    for logger in wandb_loggers(loggers):
        logger.log_image(key=key, images=[str(path)], step=step)
    for logger in loggers:
        if type(logger).__name__ == "TensorBoardLogger":
            import matplotlib.image as mpimg

            logger.experiment.add_image(key, mpimg.imread(path)[..., :3], step, dataformats="HWC")


def log_html(loggers: list, key: str, path: Path, step: int) -> None:
    """A page to wandb's HTML panel."""
    for logger in wandb_loggers(loggers):
        import wandb

        # inject=False: no stylesheet fetched from wandb's servers; the page stays offline.
        logger.log_metrics({key: wandb.Html(path.read_text(encoding="utf-8"), inject=False)}, step=step)
