"""fine_tune.py through train.py: a run fine-tuned from a trained one on a translation memory of its own, its
starting run's corpus replayed and scored beside it; another pair or shape refused in one line; a stopped fine-tune
resumes as itself."""

import json
import logging
import os
import signal

import lightning as L
import pytest
import torch
from hydra.utils import instantiate

from runtime import fine_tune
from data.corpus import CorpusError
from runtime.fine_tune import starting_run
from helpers import NO_VIEWS, compose_train, final_step
from model.inference.model_card import model_card
from model.inference.run_folder import read_checkpoint
from model.inference.translator import Translator
from runtime.settings import SettingsError
from runtime.stop_and_clock import TrainingInterrupted


def health_memory(folder):
    """A small corpus of one topic as a CAT tool exports it: a TMX memory, Spanish first, regions in its languages,
    inline codes around a word."""
    units = "".join(f'<tu><tuv xml:lang="es-ES"><seg>El médico {i} está en el hospital.</seg></tuv>'
                    f'<tuv xml:lang="en-US"><seg>The <bpt i="1">&lt;b&gt;</bpt>doctor<ept i="1">&lt;/b&gt;</ept> {i} '
                    f'is at the hospital.</seg></tuv></tu>\n' for i in range(200))
    path = folder / "health.tmx"
    path.write_text(f'<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4"><header srclang="es-ES"/><body>\n'
                    f'{units}</body></tmx>\n', encoding="utf-8")
    return path


def test_a_fine_tune_starts_from_the_runs_weights_tokenizer_and_shape_and_refuses_another_pair_or_shape(
        smoke_run, tmp_path, monkeypatch):
    cfg = compose_train("experiment=finetune", f"init_from={smoke_run}", "model.d_model=64", "model.dropout=0.2",
                        f"paths.output_dir={tmp_path / 'tuned'}")
    starting = starting_run(cfg)
    base = read_checkpoint(smoke_run / "checkpoints" / "final.ckpt")
    assert starting.checkpoint == smoke_run / "checkpoints" / "final.ckpt"
    assert cfg.model.d_model == base["hyper_parameters"]["model_config"]["d_model"] == 32  # the run's shape
    assert cfg.model.dropout == 0.2  # a dropout may change
    assert cfg.data.tokenizer_from == str(smoke_run) and cfg.data.original.limit_pairs == 3000
    model = instantiate(cfg.model)
    starting.load_into(model, resumes=False)
    assert all(torch.equal(w, base["state_dict"][f"model.{k}"]) for k, w in model.state_dict().items())

    monkeypatch.setattr(fine_tune, "command_line_keys", lambda: {"model.d_model", "model.dropout"})
    with pytest.raises(SettingsError) as refused:
        starting_run(compose_train("experiment=finetune", f"init_from={smoke_run}", "model.d_model=64"))
    assert str(refused.value) == (f"init_from={smoke_run}: model.d_model would change the shape of its model; a "
                                  f"fine-tune keeps it (dropouts may change)")
    with pytest.raises(SettingsError) as refused:
        starting_run(compose_train("experiment=finetune", f"init_from={smoke_run}", "data.target_lang=nl"))
    assert str(refused.value) == (f"init_from={smoke_run} translates English→Spanish, this run English→Dutch: a "
                                  f"fine-tune keeps its starting run's pair (data.source_lang / data.target_lang)")
    with pytest.raises(SettingsError, match=r"^init_from: .*nowhere: no such run folder or checkpoint$"):
        starting_run(compose_train(f"init_from={tmp_path / 'nowhere'}"))


class SigtermAt(L.Callback):
    """SIGTERM to this process once training reaches ``step``, as a scheduler stops a job."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: L.Trainer, *args) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_stopped_fine_tune_resumes_as_itself_and_scores_both_corpora(smoke_run, data_cache, tmp_path, caplog):
    from train import train

    caplog.set_level(logging.INFO)
    run_dir, corpus = tmp_path / "tuned", health_memory(tmp_path)
    command = ("experiment=finetune", f"init_from={smoke_run}", f"data.corpus_path={corpus}", "logger=csv", NO_VIEWS,
               f"paths.output_dir={run_dir}", f"data.cache_dir={data_cache}", "runtime.max_time=null",
               "runtime.precision=32-true", "trainer.max_steps=30", "trainer.val_check_interval=15",
               "trainer.log_every_n_steps=5", "module.val_bleu_samples=20", "module.search.beam_size=1",
               "+callbacks.sigterm._target_=test_fine_tune.SigtermAt", "+callbacks.sigterm.step=12",
               "data.exclude_words=[ninguno]")  # lists and dicts among the settings: checkpoints still load safely
    with pytest.raises(TrainingInterrupted):
        train(compose_train(*command))
    said = caplog.text
    assert "corpus: health.tmx as tmx: xml:lang en → es, 400 inline tags dropped" in said  # how it was read
    assert "tokenizer coverage of the new corpus: pieces per word src" in said
    assert f"fine-tuning from {smoke_run / 'checkpoints' / 'final.ckpt'}" in said
    saved_at = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert saved_at == 12

    caplog.clear()
    train(compose_train(*command))  # the same command: its own checkpoint, never init_from again
    assert "resuming the interrupted run" in caplog.text and "fine-tuning from" not in caplog.text
    assert "a fine-tune resumes from its own checkpoint" in caplog.text
    assert final_step(run_dir) == 30
    scores, started = (json.loads((run / "test_metrics.json").read_text()) for run in (run_dir, smoke_run))
    assert scores["sentences"] == 20  # a tenth of 200
    assert scores["original"]["sentences"] == started["sentences"]  # the starting run's own test split
    assert 0 <= scores["original"]["bleu"] <= 100
    metrics = "".join(path.read_text() for path in (run_dir / "csv").rglob("metrics.csv"))
    assert all(name in metrics for name in ("val/bleu", "val_original/bleu", "test/bleu", "test_original/bleu"))
    translator = Translator.load(run_dir, device="cpu")
    card = model_card(translator.model, translator.settings, translator.files.checkpoint, tmp_path)
    assert f"- fine-tuned from `{smoke_run}`" in card


def test_replay_says_when_the_original_is_too_small_for_its_ratio_and_refuses_no_new_pairs(
        smoke_run, data_cache, tmp_path, caplog):
    corpus = tmp_path / "doctors.tsv"
    corpus.write_text("en\tes\n" + "".join(f"The doctor {i} is here.\tEl médico {i} está aquí.\n" for i in range(300)),
                      encoding="utf-8")
    settings = ("experiment=finetune", f"init_from={smoke_run}", f"data.corpus_path={corpus}",
                f"data.cache_dir={data_cache}", "data.on_device=false")
    cfg = compose_train(*settings)
    starting_run(cfg)
    cfg.data.original.limit_pairs = 100  # (starting_run sets 3000)
    datamodule = instantiate(cfg.data, _convert_="all")
    with caplog.at_level(logging.WARNING):
        datamodule.setup()  # 240 new training pairs, about 80 original: 0.33 each, not 1
    assert "data.replay=1.0 asks for 1 original pairs per new one, but the original corpus has" in caplog.text
    cfg = compose_train(*settings, "data.max_sentence_len=3")  # every new pair longer than that
    starting_run(cfg)
    with pytest.raises(CorpusError, match=r"^the new corpus has no training pair within data.max_sentence_len=3 "):
        instantiate(cfg.data, _convert_="all").setup()
