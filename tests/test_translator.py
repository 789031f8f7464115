"""model/translator.py: loading a run folder safely, and translating with the one search entry point."""

import shutil

import pytest
import torch

from data.sampler import pad_batch
from data.tokenizer import TranslationTokenizer
from model.search import (SearchConfig, beam_search, greedy_decode, length_penalty_factor, sentence_attention,
                          sequence_log_prob)
from model.translator import RunLoadError, Translator

SENTENCES = ["I like cats.", "Where is the station?", "Tom is very tall.", "It is late."]


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


def test_beam_never_below_greedy_on_trained_run(smoke_run):
    translator = Translator.load(smoke_run)
    tok = translator.tokenizer
    ids = translator.encode(SENTENCES)
    src = pad_batch(ids, tok.pad_id)
    greedy = greedy_decode(translator.model, src, tok.bos_id, tok.eos_id)
    one, _ = beam_search(translator.model, src, tok.bos_id, tok.eos_id, beam_size=1)
    assert torch.equal(one, greedy)
    lengths = (greedy != tok.pad_id).sum(1).float()
    greedy_score = sequence_log_prob(translator.model, src, greedy, tok.bos_id, tok.eos_id) / length_penalty_factor(lengths, 0.6)
    _, beam_score = beam_search(translator.model, src, tok.bos_id, tok.eos_id, beam_size=5, length_penalty=0.6)
    assert torch.all(beam_score >= greedy_score - 1e-4)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_attention_belongs_to_the_ids_that_were_output(smoke_run, beam_size):
    translator = Translator.load(smoke_run)
    tok = translator.tokenizer
    ids = translator.encode(SENTENCES)
    texts, attention = translator.translate_ids(ids, SearchConfig(beam_size=beam_size), attention_rows=(1, 3))
    assert sorted(attention) == [1, 3]
    for row in (1, 3):
        sentence = attention[row]
        outputs = sentence.output_ids
        assert sentence.src_ids == ids[row] and sentence.input_ids == [tok.bos_id] + outputs[:-1]
        # The output ids are exactly the printed translation (plus EOS when the search ended with one).
        assert tok.decode_tgt([[t for t in outputs if t != tok.eos_id]]) == [texts[row]]
        expected = sentence_attention(translator.model, ids[row], outputs, tok.bos_id).maps
        for kind in ("encoder_self", "decoder_self", "cross"):
            for got, want in zip(getattr(sentence.maps, kind), getattr(expected, kind)):
                torch.testing.assert_close(got, want)
        assert sentence.maps.cross[0].shape[1:] == (len(outputs), len(ids[row]))


def test_encode_truncates_long_sources_keeping_eos(smoke_run):
    # A million characters are cut before tokenizing (bounded time and memory), then to max_len tokens.
    translator = Translator.load(smoke_run)
    ids = translator.encode(["word " * 400, "Short.", "x" * 10**6])
    assert translator.truncated == 2 and len(ids[0]) == len(ids[2]) == translator.max_source_tokens
    assert ids[0][-1] == translator.tokenizer.eos_id and len(ids[1]) < 10


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
