"""translate.py, the command line, on a smoke-trained run folder."""

import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT, explorer_data
from model.confidence import MARKS
from model.search import SearchConfig
from model.inference.translator import Translator


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


def test_a_pasted_line_gives_one_line_as_the_translator_and_a_truncated_one_is_named(smoke_run, tmp_path):
    lines = ["Tom is very tall. It is late.\u2028Where is the station?", "\ufeffDO NOT ENTER.", "- Hello: I am here.",
             "word" * 300]
    source = tmp_path / "in.txt"
    source.write_text("\ufeff" + "\r\n".join(lines) + "\n", encoding="utf-8")  # a BOM, Windows line ends
    result = translate(f"run={smoke_run}", f"input={source}", "beam_size=1")
    expected = [t.text for t in Translator.load(smoke_run).translate(lines, SearchConfig(beam_size=1))]
    assert result.returncode == 0 and result.stdout.decode().split("\n") == [*expected, ""]  # as `wc -l` counts
    assert "truncated: line(s) 4" in result.stderr.decode()


def test_scores_true_writes_score_mark_and_flags_beside_each_line(smoke_run):
    lines = ["I like cats.", "", "Tom is very tall. It is late."]
    result = translate(f"run={smoke_run}", "scores=true", "beam_size=2", stdin="\n".join(lines).encode() + b"\n")
    rows = [line.split("\t") for line in result.stdout.decode().split("\n")[:-1]]
    assert result.returncode == 0 and [len(row) for row in rows] == [5, 5, 5] and rows[1] == [""] * 5
    expected = Translator.load(smoke_run).translate(lines, SearchConfig(beam_size=2))
    assert [row[0] for row in rows] == [t.text for t in expected]
    assert all(float(rows[i][1]) <= 0 and rows[i][2] in MARKS for i in (0, 2))  # the smoke run wrote its marks
    # Score and agreement (with the beam's other hypothesis) of the line's least sure sentence.
    least_sure = min((s.confidence for s in expected[2].sentences), key=lambda c: (-MARKS.index(c.mark), c.combined))
    assert expected[2].confidence == least_sure and float(rows[2][1]) == pytest.approx(least_sure.score, abs=2e-3)
    assert [float(rows[i][4]) for i in (0, 2)] == pytest.approx([expected[i].confidence.agreement for i in (0, 2)],
                                                                abs=0.05)


def test_alignments_true_prints_each_lines_word_alignment_after_a_tab(smoke_run):
    lines = ["I like cats.", "", "- Note: Tom is very tall. It is late.", "Hello\tGood night."]
    result = translate(f"run={smoke_run}", "alignments=true", "beam_size=2", stdin="\n".join(lines).encode() + b"\n")
    rows = [line.rsplit("\t", 1) for line in result.stdout.decode().split("\n")[:-1]]
    expected = Translator.load(smoke_run).translate(lines, SearchConfig(beam_size=2), alignments=True)
    assert result.returncode == 0 and len(rows) == 4 and rows[1] == ["", ""]  # one line each; an empty one empty
    assert [text for text, _ in rows] == [t.text for t in expected]
    for (text, links), line, translation in zip(rows, lines, expected):
        pairs = [tuple(map(int, link.split("-"))) for link in links.split()]
        assert pairs == translation.alignment and len({t for _, t in pairs}) == len(pairs)  # one link a word
        assert all(s < len(line.split()) and t < len(text.split()) for s, t in pairs)
    marker_and_label = {t for _, t in expected[2].alignment}
    assert 0 not in marker_and_label and 1 in marker_and_label  # "-" is kept, not translated; "Note:" is


def test_marks_set_before_the_agreement_read_the_score_alone_and_say_so(smoke_run, tmp_path):
    run = tmp_path / "run"  # a copy whose confidence.json was written before the agreement
    shutil.copytree(smoke_run, run, ignore=shutil.ignore_patterns("ctranslate2*", "transformers", "wandb", "attention"))
    calibration = json.loads((run / "confidence.json").read_text())
    (run / "confidence.json").write_text(json.dumps({k: v for k, v in calibration.items() if k != "combination"}))
    result = translate(f"run={run}", "scores=true", "beam_size=2", "I like cats.")
    assert result.returncode == 0 and "from before the agreement: marks from the score alone" in result.stderr.decode()
    score, mark, flags = result.stdout.decode().split("\t")[1:4]
    by_score = MARKS[(float(score) < calibration["check_below"]) + (float(score) < calibration["wrong_below"])]
    assert mark == (by_score if not flags else "likely wrong")  # the score's own thresholds


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
    from translate import main

    with pytest.raises(SystemExit, match="^translate.py: engine=marian: one of ours, ctranslate2, transformers$"):
        main(["run=x", "engine=marian", "Hi."])  # refused from the one table of engines, before the run


def test_attention_image(smoke_run, tmp_path):
    image = tmp_path / "att.png"
    result = translate(f"run={smoke_run}", "The sky is blue.", f"attention={image}", "attention_all=true",
                       "beam_size=2")
    assert result.returncode == 0, result.stderr.decode()
    # The picture's axes are the ids of the printed translation (the same search, in-process).
    translator = Translator.load(smoke_run)
    translation = translator.translate(["The sky is blue."], SearchConfig(beam_size=2))[0]
    assert result.stdout.decode() == translation.text + "\n"
    n_src, n_out = len(translation.sentences[0].src_ids), len(translation.sentences[0].output_ids)
    layers, heads = len(translator.model.decoder_layers), translator.model.decoder_layers[0].cross_attn.num_heads
    # attention_grid: max(2.5, 0.32·keys + 1.2) inches per head column, max(2.2, 0.32·queries + 1.2) per
    # layer row, at 80 dpi; matplotlib drops the fraction of a pixel.
    assert png_size(image) == (int(max(2.5, 0.32 * n_src + 1.2) * heads * 80),
                               int(max(2.2, 0.32 * n_out + 1.2) * layers * 80))
    assert png_size(tmp_path / "att_encoder_self.png")[0] == png_size(image)[0]  # same source tokens on its axes
    assert png_size(tmp_path / "att_decoder_self.png")[1] == png_size(image)[1]  # same output tokens as rows


def test_unusable_run_is_one_line(smoke_run, tmp_path):
    (tmp_path / "checkpoints").mkdir()
    shutil.copy(smoke_run / "checkpoints" / "final.ckpt", tmp_path / "checkpoints" / "final.ckpt")
    result = translate(f"run={tmp_path}", "Hello.")
    assert result.returncode != 0 and "tokenizer missing" in result.stderr.decode()
    assert result.stderr.decode().strip().count("\n") == 0  # one line, no traceback


@pytest.mark.parametrize("beam_size", [1, 3])
def test_attention_explorer_page_of_the_printed_translation(smoke_run, tmp_path, beam_size):
    page = tmp_path / "sky.html"
    result = translate(f"run={smoke_run}", "The sky is blue.", f"attention={page}", f"beam_size={beam_size}")
    assert result.returncode == 0, result.stderr.decode()
    sentence = explorer_data(page)["steps"][0]["sentences"][0]
    translation = result.stdout.decode().rstrip("\n")
    assert (sentence["source"], sentence["translation"]) == ("The sky is blue.", translation)
    # The tokens are the tokenizer's tokens of the ids the search output, for this translation.
    translator = Translator.load(smoke_run)
    expected = translator.translate(["The sky is blue."], SearchConfig(beam_size=beam_size))[0].sentences[0]
    tok = translator.tokenizer
    assert sentence["outputs"] == tok.tgt_tokens(expected.output_ids)
    assert sentence["src"] == tok.src_tokens(expected.src_ids) and sentence["inputs"][0] == "<bos>"
    assert tok.decode_tgt([expected.output_ids]) == [translation]
    model = translator.model
    assert [len(sentence["maps"][kind]) for kind in ("encoder_self", "decoder_self", "cross")] == [
        len(model.encoder_layers), len(model.decoder_layers), len(model.decoder_layers)]


def test_output_naming_the_input_is_refused_and_nothing_is_lost(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("I like cats.\n")
    (tmp_path / "link.txt").symlink_to(source)
    for output in (source, tmp_path / "link.txt"):  # the same file, also through a link
        result = translate("run=does-not-matter", f"input={source}", f"output={output}")
        assert result.returncode != 0 and "is the input file" in result.stderr.decode()
        assert result.stderr.decode().count("\n") == 1  # checked before the model loads: one line
    assert source.read_text() == "I like cats.\n"


def test_missing_folders_and_bad_sizes_are_one_line_before_loading(tmp_path):
    for args, message in (([f"output={tmp_path / 'no' / 'out.txt'}"], "output folder"),
                          ([f"attention={tmp_path / 'no' / 'a.html'}", "Hi."], "attention folder"),
                          (["batch_size=0", "Hi."], "batch_size")):  # beam_size=0: with the run, below
        result = translate("run=does-not-matter", *args)
        stderr = result.stderr.decode()
        assert result.returncode != 0 and message in stderr and stderr.count("\n") == 1, stderr


def test_a_failed_run_never_replaces_a_good_output(smoke_run, tmp_path):
    good = tmp_path / "out.txt"
    good.write_text("an earlier good translation\n")
    # A background job of a non-interactive shell (as CI may be) inherits SIGINT ignored: give the
    # child the default disposition, as a terminal's foreground process has.
    process = subprocess.Popen([sys.executable, str(ROOT / "translate.py"), f"run={smoke_run}", f"output={good}",
                                "beam_size=1", "chunk_size=1"], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    process.stdin.write(b"I like cats.\n")
    process.stdin.flush()
    partial = tmp_path / "out.txt.partial"
    deadline = time.time() + 120
    while (not partial.is_file() or not partial.read_text()) and time.time() < deadline:
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)  # Ctrl-C
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr.decode()
    assert "Traceback" not in stderr.decode() and "interrupted after 1 line(s)" in stderr.decode()
    assert good.read_text() == "an earlier good translation\n"  # untouched
    assert partial.read_text().count("\n") == 1  # what was translated is kept


def test_typed_lines_are_answered_at_once(smoke_run):
    process = subprocess.Popen([sys.executable, str(ROOT / "translate.py"), f"run={smoke_run}", "beam_size=1"],
                               cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for sentence in (b"I like cats.\n", b"Where is the station?\n"):
            process.stdin.write(sentence)
            process.stdin.flush()  # ... and wait, as a person at a terminal does
            ready, _, _ = select.select([process.stdout], [], [], 120)
            assert ready and process.stdout.readline().endswith(b"\n")
    finally:
        process.stdin.close()
    assert process.wait(timeout=60) == 0


def test_a_closed_pipe_ends_quietly(smoke_run):
    process = subprocess.Popen([sys.executable, str(ROOT / "translate.py"), f"run={smoke_run}", "beam_size=1",
                                "chunk_size=1"], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdin.write(b"Hello.\n" * 3)
    process.stdin.flush()
    process.stdout.readline()
    process.stdout.close()  # `… | head -1`
    _, stderr = process.communicate(b"More lines.\n" * 200, timeout=120)
    assert process.returncode == 0 and b"Traceback" not in stderr, stderr.decode()


def test_a_huge_line_without_newlines_is_cut_with_one_warning(smoke_run, tmp_path):
    source = tmp_path / "huge.txt"
    with open(source, "wb") as f:  # 8 MB, no newline at all
        for _ in range(8):
            f.write(b"words " * 174763)
    result = translate(f"run={smoke_run}", f"input={source}", "beam_size=1")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().count("\n") == 1  # one line in, one line out
    stderr = result.stderr.decode()
    assert stderr.count("were cut there") == 1 and stderr.count("truncated") == 1


def test_the_runs_own_search_and_length_limit_unless_the_command_line_says_otherwise(smoke_run):
    assert Translator.load(smoke_run).settings.search == SearchConfig(beam_size=2)  # smoke's module.search
    overridden = Translator.load(smoke_run, overrides={"beam_size": 1, "max_len_b": 3, "max_sentence_len": 5}).settings
    assert overridden.search == SearchConfig(beam_size=1, max_len_b=3) and overridden.max_sentence_len == 5
    from translate import main

    with pytest.raises(SystemExit, match="^translate.py: beam_size must be between 1 .*, got 0$"):
        main([f"run={smoke_run}", "beam_size=0", "Hello."])
    # The run reads 128 source tokens (data.max_sentence_len); max_sentence_len=5 cuts there instead.
    long_line = "word " * 200
    for option, cut in (("", 128), ("max_sentence_len=5", 5)):
        result = translate(f"run={smoke_run}", long_line, "beam_size=1", *filter(None, [option]))
        assert result.returncode == 0 and f"longer than {cut} tokens, even cut at their inner" in result.stderr.decode()


def test_translating_imports_none_of_trainings_libraries(smoke_run, tmp_path):
    # What makes translate.py start at once: no Lightning, datasets, matplotlib or Hydra, even for the explorer page.
    code = ("import sys, translate; code = translate.main(sys.argv[1:]); "
            "print(sorted(m for m in ('lightning', 'datasets', 'matplotlib', 'hydra') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code, f"run={smoke_run}", "The sky is blue.",
                             f"attention={tmp_path / 'sky.html'}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]" and (tmp_path / "sky.html").is_file()


def test_outputs_that_are_not_regular_files_are_refused_before_loading(tmp_path):
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link_to_folder").symlink_to(tmp_path / "folder")
    for output in (tmp_path / "folder", tmp_path / "fifo", tmp_path / "link_to_folder", Path("/dev/null")):
        result = translate("run=does-not-matter", "Hi.", f"output={output}")
        stderr = result.stderr.decode()
        assert result.returncode != 0 and "is not a regular file" in stderr and stderr.count("\n") == 1, stderr
    assert (tmp_path / "folder").is_dir() and (tmp_path / "link_to_folder").is_symlink()


def test_a_link_to_a_file_is_written_through(smoke_run, tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    (tmp_path / "link.txt").symlink_to(real)
    result = translate(f"run={smoke_run}", "Hello.", "Good night.", f"output={tmp_path / 'link.txt'}", "beam_size=1")
    assert result.returncode == 0, result.stderr.decode()
    assert (tmp_path / "link.txt").is_symlink() and real.read_text().count("\n") == 2  # the link stays


def test_attention_files_are_html_or_pictures_and_the_printed_path_is_written(smoke_run, tmp_path):
    for name in ("x.txt", "x", "x.jpeg"):
        result = translate("run=does-not-matter", "Hi.", f"attention={tmp_path / name}")
        stderr = result.stderr.decode()
        assert result.returncode != 0 and "must end in one of .html, .png, .svg, .pdf" in stderr, stderr
    result = translate(f"run={smoke_run}", "The sky is blue.", f"attention={tmp_path / 'sky.svg'}", "beam_size=1")
    assert result.returncode == 0, result.stderr.decode()
    assert f"attention map written to {tmp_path / 'sky.svg'}" in result.stderr.decode()
    assert (tmp_path / "sky.svg").read_text().lstrip().startswith("<?xml")


def test_sentences_with_equals_signs_go_after_a_double_dash(smoke_run):
    from translate import parse_args

    cfg, sentences = parse_args([f"run={smoke_run}", "beam_size=1", "--", "x=1 is an equation.", "beam_size=3"])
    assert sentences == ["x=1 is an equation.", "beam_size=3"] and cfg.beam_size == 1
    result = translate(f"run={smoke_run}", "x=1 is an equation.")
    assert result.returncode != 0 and "a sentence with '=' goes after --" in result.stderr.decode()
    result = translate(f"run={smoke_run}", "beam_size=1", "--", "x=1 is an equation.", "y=2.")
    assert result.returncode == 0 and result.stdout.decode().count("\n") == 2, result.stderr.decode()
