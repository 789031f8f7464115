"""model/inference/run_folder.py: reading a run folder safely; one clear line for every unusable file."""

import shutil

import pytest
import torch

from data.tokenizer import TranslationTokenizer
from data.languages import LanguagePair
from model.inference.run_folder import RunLoadError, RunSettings, run_settings
from model.inference.translator import Translator
from model.search import SearchConfig


def test_missing_and_mismatched_files_are_clear_errors(smoke_run, tmp_path):
    with pytest.raises(RunLoadError, match="no such run"):
        Translator.load(tmp_path / "nowhere")
    empty = tmp_path / "empty_run"
    (empty / "checkpoints").mkdir(parents=True)
    with pytest.raises(RunLoadError, match="no checkpoint"):
        Translator.load(empty)
    copy = tmp_path / "copy"
    shutil.copytree(smoke_run / "checkpoints", copy / "checkpoints")
    with pytest.raises(RunLoadError, match="tokenizer missing"):
        Translator.load(copy)
    # A tokenizer with another vocabulary is refused, naming the file.
    TranslationTokenizer.train([("other words here", "otras palabras")] * 30, vocab_size=290).save(copy)
    with pytest.raises(RunLoadError, match=r"tokenizer\.json: tokenizer does not match"):
        Translator.load(copy)


def test_checkpoints_load_without_unpickling_objects(smoke_run, tmp_path):
    for name in ("final.ckpt", "best.ckpt", "last.ckpt"):
        torch.load(smoke_run / "checkpoints" / name, weights_only=True)  # tensors and plain values only

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    shutil.copy(smoke_run / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "checkpoints").mkdir()
    torch.save({"state_dict": {}, "hyper_parameters": {"model_config": Evil()}}, tmp_path / "checkpoints" / "final.ckpt")
    with pytest.raises(RunLoadError, match="not a loadable checkpoint"):
        Translator.load(tmp_path)


def copy_run(smoke_run, folder):
    shutil.copytree(smoke_run, folder, ignore=shutil.ignore_patterns("wandb", "attention", "csv"))
    return folder


def test_damaged_files_are_one_line_naming_the_file(smoke_run, tmp_path):
    run = copy_run(smoke_run, tmp_path / "run")
    final = run / "checkpoints" / "final.ckpt"
    (run / "tokenizer.json").write_text('{"truncated": ')
    with pytest.raises(RunLoadError, match=r"tokenizer\.json: unusable tokenizer") as error:
        Translator.load(final)
    assert "\n" not in str(error.value)
    shutil.copy(smoke_run / "tokenizer.json", run / "tokenizer.json")
    torch.save([1, 2, 3], tmp_path / "list.ckpt")  # a checkpoint that is not a dict
    with pytest.raises(RunLoadError, match="list.ckpt: not a checkpoint of this project"):
        Translator.load(tmp_path / "list.ckpt")
    state = torch.load(final, weights_only=True)
    state["hyper_parameters"]["model_config"]["d_model"] = 64  # weights that do not fit their config
    torch.save(state, run / "checkpoints" / "misfit.ckpt")
    with pytest.raises(RunLoadError, match=r"misfit.ckpt: its weights do not fit its model_config") as error:
        Translator.load(run / "checkpoints" / "misfit.ckpt")
    assert "\n" not in str(error.value)


def test_a_broken_or_diverged_final_checkpoint_falls_back(smoke_run, tmp_path, caplog):
    run = copy_run(smoke_run, tmp_path / "run")
    final = run / "checkpoints" / "final.ckpt"
    final.write_bytes(final.read_bytes()[:5000])  # truncated
    with caplog.at_level("WARNING"):
        translator = Translator.load(run)
    assert "final.ckpt: not a loadable checkpoint" in caplog.text
    expected = torch.load(run / "checkpoints" / "best.ckpt", weights_only=True)["state_dict"]
    torch.testing.assert_close(translator.model.output.weight, expected["model.output.weight"])
    state = torch.load(smoke_run / "checkpoints" / "final.ckpt", weights_only=True)
    state["state_dict"]["model.output.weight"][0, 0] = float("nan")  # a diverged run's weights
    torch.save(state, final)
    caplog.clear()
    with caplog.at_level("WARNING"):
        Translator.load(run)
    assert "final.ckpt: weights are not finite" in caplog.text
    with pytest.raises(RunLoadError, match="weights are not finite"):
        Translator.load(final)  # named explicitly: refused, never used


def test_the_runs_own_settings_are_read_from_its_config(smoke_run, corpus_path, tmp_path):
    # experiment=smoke searches with beam 2 (configs/experiment/smoke.yaml) and reads 128 source tokens.
    assert run_settings(smoke_run) == RunSettings(SearchConfig(beam_size=2), 128, LanguagePair("en", "es"),
                                                  corpus_path.name)
    assert run_settings(tmp_path) == RunSettings()  # no config.yaml: the defaults
    (tmp_path / "config.yaml").write_text("module:\n  search:\n    beam_size: 0\n")
    with pytest.raises(RunLoadError, match=r"config\.yaml: unreadable run settings"):
        run_settings(tmp_path)
