"""model/views/callback.py: at each validation, the fixed sentences' pictures, weights, explorer page
and statistics, written by the callback from what the LightningModule hands it, drawn in a background
process while training goes on."""

import time
from pathlib import Path

import lightning as L
import pytest
import torch

from helpers import explorer_data, small_datamodule, tiny_model
from model.training.schedule import budget_schedule
from model.training.translation_module import TranslationModule
from model.views.callback import AttentionViews, host_copy
from model.views.statistics import attention_statistics

pytestmark = pytest.mark.slow  # trains a model


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model fitted for 6 steps on a generated corpus, validating at steps 3 and 6."""
    folder = tmp_path_factory.mktemp("views")
    datamodule = small_datamodule(folder)
    vocab = datamodule.src_vocab_size
    module = TranslationModule(tiny_model(vocab, num_heads=2, num_encoder_layers=1, num_decoder_layers=1),
                               lambda params: torch.optim.AdamW(params, lr=1e-2), budget_schedule(4, "inverse_sqrt"),
                               val_bleu_samples=10)
    trainer = L.Trainer(max_steps=6, val_check_interval=3, check_val_every_n_epoch=None, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[AttentionViews(sentences=2)], default_root_dir=str(folder / "run"))
    trainer.fit(module, datamodule=datamodule)
    return trainer, module


def test_pictures_and_weights_of_each_validation(trained):
    trainer, _ = trained
    root = trainer.default_root_dir
    steps = sorted(p.name for p in (Path(root) / "attention").glob("step_*"))
    assert steps == ["step_000003", "step_000006"]
    folder = Path(root) / "attention" / "step_000006"
    kinds = ("cross", "decoder_self", "encoder_self")
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["attention.json"] + [f"{kind}_sentence{n}.png" for kind in kinds for n in (0, 1)])


def test_the_explorer_holds_every_validation_of_the_modules_sentences(trained):
    trainer, module = trained
    module.eval()
    page = explorer_data(Path(trainer.default_root_dir) / "attention" / "explorer.html")
    assert [s["label"] for s in page["steps"]] == ["step 3", "step 6"]
    views = module.sentence_views(2)  # the same sentences, translated the same way again
    last = page["steps"][-1]["sentences"]
    assert [s["source"] for s in last] == [v.source for v in views]
    assert [s["outputs"] for s in last] == [v.output_tokens for v in views]
    cross = torch.tensor(last[0]["maps"]["cross"][0]) / 1000
    assert (cross - views[0].attention.maps.cross[0]).abs().max() <= 5e-4 + 1e-7


def test_statistics_are_logged_for_the_same_sentences(trained):
    trainer, module = trained
    logged = attention_statistics([view.attention for view in module.sentence_views(2)])
    assert "attention_cross/entropy_L1H2" in logged
    assert all(float(trainer.callback_metrics[key]) == pytest.approx(value, abs=1e-5) for key, value in logged.items())


def test_no_sentences_draw_nothing(tmp_path):
    with pytest.raises(ValueError, match="sentences must be 0 or more"):
        AttentionViews(sentences=-1)
    with pytest.raises(ValueError, match="background must be true or false"):
        AttentionViews(background="sometimes")
    trainer = L.Trainer(logger=False, default_root_dir=str(tmp_path))
    AttentionViews(sentences=0).on_validation_epoch_end(trainer, None)  # the module is not even asked
    assert not (tmp_path / "attention").exists()


def render_when_released(marker: str, *arguments) -> dict:
    """``render_step`` in the background process, once ``marker`` exists (at most a minute): a drawing
    that training must not wait for. Records whether it was released or gave up."""
    import time

    from model.views.callback import render_step

    deadline = time.monotonic() + 60
    while not Path(marker).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    Path(marker + ".seen").write_text("released" if Path(marker).exists() else "timed out")
    return render_step(*arguments)


def test_training_goes_on_while_the_pictures_are_drawn(tmp_path):
    """The drawing of step 3 waits until step 5 has trained: had the callback waited for it, training
    could not reach step 5 before the drawing gave up."""
    import functools

    datamodule = small_datamodule(tmp_path)
    module = TranslationModule(tiny_model(datamodule.src_vocab_size, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1),
                               lambda params: torch.optim.AdamW(params, lr=1e-2), budget_schedule(4, "inverse_sqrt"),
                               val_bleu_samples=10)
    marker = str(tmp_path / "release")
    views = AttentionViews(sentences=1, background=True)  # the GPU's way, on the CPU
    views.render = functools.partial(render_when_released, marker)

    class Release(L.Callback):
        pending_at_step_5 = None

        def on_train_batch_end(self, trainer, *args) -> None:
            if trainer.global_step == 5:
                self.pending_at_step_5 = [step for _, step, _ in views._pending]
                Path(marker).touch()

    release = Release()
    trainer = L.Trainer(max_steps=6, val_check_interval=3, check_val_every_n_epoch=None, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[views, release], default_root_dir=str(tmp_path / "run"))
    trainer.fit(module, datamodule=datamodule)
    assert release.pending_at_step_5 == [3]  # still being drawn two steps later
    assert (tmp_path / "release.seen").read_text() == "released"
    root = tmp_path / "run" / "attention"  # training's end waited for every drawing
    assert sorted(p.name for p in root.glob("step_*")) == ["step_000003", "step_000006"]
    assert [s["label"] for s in explorer_data(root / "explorer.html")["steps"]] == ["step 3", "step 6"]
    assert views._pool is None and not views._pending


def render_stuck_in_the_background(*arguments) -> dict:
    """``render_step``, except in a background process, where it never ends: a niced process on a machine
    that others keep busy."""
    import multiprocessing
    import time

    from model.views.callback import render_step

    if multiprocessing.parent_process() is not None:
        time.sleep(3600)
    return render_step(*arguments)


def test_at_the_end_what_the_background_has_not_drawn_is_drawn_at_once(trained, tmp_path):
    trainer, module = trained
    callback = AttentionViews()
    callback.render = render_stuck_in_the_background
    callback.draw([host_copy(view) for view in module.eval().sentence_views(1)], tmp_path, 4, background=True)
    start = time.monotonic()
    callback.wait()
    assert time.monotonic() - start < 600 and callback._pool is None and not callback._pending  # not an hour
    assert [s["label"] for s in explorer_data(tmp_path / "explorer.html")["steps"]] == ["step 4"]


def render_stuck_when_niced(*arguments) -> dict:
    """``render_step``, except in a niced process (the background's), where it never ends; it leaves the
    process id of whoever drew."""
    import os

    from model.views.callback import render_step

    if os.nice(0) > 0:
        time.sleep(3600)
    (Path(arguments[1]) / f"drawn_by_{os.getpid()}").touch()
    return render_step(*arguments)


def test_at_the_end_unfinished_drawings_are_drawn_side_by_side_and_all_reach_the_explorer(trained, tmp_path,
                                                                                          monkeypatch):
    import os

    import model.views.callback as callback_module

    monkeypatch.setattr(callback_module, "drawing_processes", lambda: 2)  # a host with 8 cores
    trainer, module = trained
    callback = AttentionViews()
    callback.render = render_stuck_when_niced
    views = [host_copy(view) for view in module.eval().sentence_views(1)]
    for step in (4, 8, 12):
        callback.draw(views, tmp_path, step, background=True)
    assert callback._pool._max_workers == 2  # two niced processes drew beside training
    start = time.monotonic()
    callback.wait()
    assert time.monotonic() - start < 600 and callback._pool is None and not callback._pending  # not an hour
    assert [s["label"] for s in explorer_data(tmp_path / "explorer.html")["steps"]] == ["step 4", "step 8", "step 12"]
    drawers = {path.name for path in tmp_path.glob("drawn_by_*")}
    assert 1 <= len(drawers) <= 2 and f"drawn_by_{os.getpid()}" not in drawers  # apart, at the run's priority


def test_drawing_in_the_background_writes_what_drawing_at_once_does(trained, tmp_path):
    trainer, module = trained
    views = [host_copy(view) for view in module.eval().sentence_views(2)]
    assert all(w.device.type == "cpu" for w in views[0].attention.maps.cross)
    at_once, background = AttentionViews(), AttentionViews()
    at_once.draw(views, tmp_path / "at_once", 7, background=False)
    background.draw(views, tmp_path / "background", 7, background=True)
    background.wait()
    for name in ("attention.json", "cross_sentence1.png"):
        assert ((tmp_path / "at_once" / "step_000007" / name).read_bytes()
                == (tmp_path / "background" / "step_000007" / name).read_bytes())
