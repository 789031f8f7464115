"""translate.py and model/inference.py on a smoke-trained run folder."""

import shutil
import struct
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from data.tokenizer import TranslationTokenizer
from model.inference import RunLoadError, Translator


def translate(*args, stdin=None):
    return subprocess.run([sys.executable, str(ROOT / "translate.py"), *args], cwd=ROOT, input=stdin,
                          capture_output=True, timeout=300)


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_file_in_file_out_keeps_every_line(smoke_run, tmp_path):
    source = tmp_path / "in.txt"
    source.write_bytes(b"I like cats.\n\nWhere is the \xff station?\n" + b"very " * 400 + b"long.\n\nGood night.\n")
    result = translate(f"run={smoke_run}", f"input={source}", f"output={tmp_path / 'out.txt'}", "beam_size=2")
    assert result.returncode == 0, result.stderr.decode()
    lines = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")
    assert len(lines) - 1 == 6  # six lines in, six out
    assert lines[1] == "" and lines[4] == ""  # empty lines stay empty
    stderr = result.stderr.decode()
    assert stderr.count("invalid UTF-8") == 1 and stderr.count("truncated") == 1


def test_stdin_and_command_line_sentences(smoke_run):
    piped = translate(f"run={smoke_run}", "beam_size=1", "chunk_size=2", stdin=b"Hello.\nI am here.\n\n")
    assert piped.returncode == 0 and piped.stdout.decode().count("\n") == 3
    args = translate(f"run={smoke_run}", "Hello.", "I am here.", "beam_size=1")
    assert args.returncode == 0 and args.stdout.decode().count("\n") == 2
    assert args.stdout.decode().split("\n")[:2] == piped.stdout.decode().split("\n")[:2]


def test_help_and_bad_options():
    help_text = translate("--help").stdout.decode()
    for option in ("run=", "input=", "output=", "beam_size=", "length_penalty=", "max_len_a=", "attention="):
        assert option in help_text
    bad = translate("run=x", "beam_sise=3")
    assert bad.returncode != 0 and "beam_sise" in bad.stderr.decode()


def test_attention_image(smoke_run, tmp_path):
    image = tmp_path / "att.png"
    result = translate(f"run={smoke_run}", "The sky is blue.", f"attention={image}", "attention_all=true")
    assert result.returncode == 0, result.stderr.decode()
    translator = Translator.load(smoke_run)
    n_src = len(translator.tokenizer.src_tokens("The sky is blue."))
    width, height = png_size(image)
    layers, heads = len(translator.model.decoder_layers), translator.model.decoder_layers[0].cross_attn.num_heads
    # attention_grid: max(2.5, 0.32·keys + 1.2) inches per head column, at 80 dpi.
    assert width == round(max(2.5, 0.32 * n_src + 1.2) * heads * 80)
    assert height > 0 and layers >= 1
    assert png_size(tmp_path / "att_encoder_self.png")[0] == width  # same source tokens on its axes
    assert (tmp_path / "att_decoder_self.png").is_file()


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
    result = translate(f"run={copy}", "Hello.")
    assert result.returncode != 0 and result.stderr.decode().strip().count("\n") == 0  # one line


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


def test_beam_never_below_greedy_on_trained_run(smoke_run, full_datamodule):
    from model.search import beam_search, greedy_decode, length_penalty_factor, sequence_log_prob

    translator = Translator.load(smoke_run)
    tok = translator.tokenizer
    ids, _ = translator.encode(["I like cats.", "Where is the station?", "Tom is very tall.", "It is late."])
    from data.sampler import pad_batch

    src = pad_batch(ids, tok.pad_id)
    greedy = greedy_decode(translator.model, src, tok.bos_id, tok.eos_id)
    one, _ = beam_search(translator.model, src, tok.bos_id, tok.eos_id, beam_size=1)
    assert torch.equal(one, greedy)
    lengths = (greedy != tok.pad_id).sum(1).float()
    greedy_score = sequence_log_prob(translator.model, src, greedy, tok.bos_id, tok.eos_id) / length_penalty_factor(lengths, 0.6)
    _, beam_score = beam_search(translator.model, src, tok.bos_id, tok.eos_id, beam_size=5, length_penalty=0.6)
    assert torch.all(beam_score >= greedy_score - 1e-4)
