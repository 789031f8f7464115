"""model/inference/export.py and search_backends.py: a run exported to CTranslate2 translates as ours does."""

import json
import shutil
import subprocess
import sys

import pytest

from helpers import ROOT, explorer_data, tiny_model
import torch

from model.inference.export import EXPORT_FILE, export_ctranslate2, exportable
from model.inference.run_folder import RunLoadError
from model.inference.search_backends import output_limit
from model.inference.translator import Translator
from model.inference.word_alignment import piece_words, sentence_links
from model.search import SearchConfig, sentence_attention
from model.views.alignment import word_alignment

SENTENCES = ["I like cats.", "Where is the station?", "Tom is very tall.", "It is late.", "The sky is blue.",
             "We have to talk about what happened yesterday.", "Hello!", "Do you speak Spanish?", "", "No."]


@pytest.fixture(scope="module")
def ours(smoke_run):
    return Translator.load(smoke_run)


@pytest.fixture(scope="module")
def exported(ours, tmp_path_factory):
    return export_ctranslate2(ours.model, ours.tokenizer, ours.files.checkpoint, tmp_path_factory.mktemp("ct2") / "float32",
                              pair=ours.settings.pair)


def test_the_export_records_the_runs_pair(exported):
    record = json.loads((exported / EXPORT_FILE).read_text(encoding="utf-8"))
    assert (record["source_lang"], record["target_lang"]) == ("en", "es")
    assert (exported / "README.md").read_text(encoding="utf-8").startswith("# English→Spanish, a CTranslate2 export")


@pytest.fixture(scope="module")
def engine(exported):
    return Translator.load(exported, engine="ctranslate2", compute_type="float32")  # run= an exported folder


@pytest.mark.parametrize("config", [SearchConfig(beam_size=1), SearchConfig(beam_size=3, length_penalty=0.0)],
                         ids=["greedy", "beam3-no-length-penalty"])
def test_the_same_translations_as_ours_in_float32(ours, engine, config):
    # Greedy, and beam search where the two length penalties agree (alpha 0: raw log-probability).
    mine = ours.translate(SENTENCES, config)
    theirs = engine.translate(SENTENCES, config)
    assert [s.output_ids for t in theirs for s in t.sentences] == [s.output_ids for t in mine for s in t.sentences]
    assert [t.text for t in theirs] == [t.text for t in mine] and theirs[8].text == ""  # empty stays empty
    # Its scores, given back from its length-normalized ones: the same mean log-probability per token as ours.
    assert [s.confidence.score for t in theirs for s in t.sentences] == pytest.approx(
        [s.confidence.score for t in mine for s in t.sentences], abs=0.01)
    # Its n-best through the same pipeline: the beam's hypotheses, best first, the best being the translation
    # (the others may differ: CTranslate2 sets finished hypotheses aside, ours keep their places in the beam).
    n_best = engine.n_best(theirs[0], config)
    assert len(n_best) == config.beam_size and n_best[0][0] == theirs[0].text
    assert all(isinstance(score, float) for _, score in n_best)
    # No agreement (its beam's others are not ours): marks by the score alone, where ours has both.
    assert all(s.confidence.agreement is None and s.confidence.combined is None for t in theirs for s in t.sentences)


def test_the_aligned_head_is_ctranslate2s_alignment_head_and_gives_our_alignments(ours, tmp_path):
    import ctranslate2

    heads = ours.model.decoder_layers[0].cross_attn.num_heads
    aligned = (len(ours.model.decoder_layers) - 1, heads - 1)  # its last head: moved first, as CTranslate2 reads it
    folder = export_ctranslate2(ours.model, ours.tokenizer, ours.files.checkpoint, tmp_path / "aligned", aligned=aligned)
    assert json.loads((folder / EXPORT_FILE).read_text(encoding="utf-8"))["aligned_head"] == list(aligned)
    tok, engine = ours.tokenizer, ctranslate2.Translator(str(folder), device="cpu", compute_type="float32")
    sources, config = ours.encode(SENTENCES[:4]), SearchConfig(beam_size=1)
    limits = [output_limit(ids, config, ours.model.max_len) for ids in sources]
    answers = [engine.translate_batch([[tok.src.id_to_token(i) for i in ids]], beam_size=1, max_decoding_length=limit,
                                      return_attention=True)[0] for ids, limit in zip(sources, limits)]
    found = [(ids, [tok.src.token_to_id(piece) for piece in answer.hypotheses[0]]) for ids, answer in zip(sources, answers)]
    found = [(ids, out + [tok.eos_id] * (len(out) < limit)) for (ids, out), limit in zip(found, limits)]  # ended
    assert [out for _, out in found] == [s.output_ids for t in ours.translate(SENTENCES[:4], config)
                                         for s in t.sentences]  # the heads reordered, the same translations
    for (ids, out), answer in zip(found, answers):  # its attention: the row predicting each output token
        mine = sentence_attention(ours.model, ids, out, tok.bos_id).maps.cross[aligned[0]][aligned[1]]
        assert torch.allclose(torch.tensor(answer.attention[0]), mine[: len(answer.attention[0])], atol=1e-5)
    links = sentence_links(ours.model, tok.src, tok.tgt, found, tok.bos_id, tok.eos_id, aligned)  # ours, as translated
    theirs = [word_alignment(torch.tensor(answer.attention[0]), [*piece_words(tok.src, ids[:-1]), None],
                             piece_words(tok.tgt, answer_ids)) for (ids, _), answer in zip(found, answers)
              for answer_ids in [[tok.src.token_to_id(piece) for piece in answer.hypotheses[0]]]]
    assert links == theirs and all(links)  # the same links from CTranslate2's attention


def test_a_pasted_line_translates_as_ours_does(ours, engine):
    lines = ["I like cats. Where is the station?  Tom is very tall.", "DO NOT ENTER. The Sky Is Blue", "2. Note: No."]
    config = SearchConfig(beam_size=1)
    assert [t.text for t in engine.translate(lines, config)] == [t.text for t in ours.translate(lines, config)]


def test_the_folder_says_where_it_came_from_and_int8_translates(ours, exported, tmp_path):
    assert (exported / "model.bin").is_file() and "final.ckpt" in (exported / "README.md").read_text()
    folder = export_ctranslate2(ours.model, ours.tokenizer, ours.files.checkpoint, tmp_path / "int8", "int8")
    int8 = Translator.load(folder, engine="ctranslate2")
    assert len(int8.translate(SENTENCES)) == len(SENTENCES)
    assert (tmp_path / "int8" / "model.bin").stat().st_size < (exported / "model.bin").stat().st_size


def test_one_checkpoint_read_for_both_engines(smoke_run, tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(smoke_run, run, ignore=shutil.ignore_patterns("ctranslate2*"))
    reads = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: reads.append(a[0]) or real_load(*a, **k))
    translator = Translator.load(run, engine="ctranslate2")  # exports the run first
    assert len(reads) == 1 and (run / "ctranslate2" / "model.bin").is_file()
    ours = Translator.load(run)
    assert ours.translate(["I like cats."], SearchConfig(beam_size=1))[0].sentences[0].output_ids == \
        translator.translate(["I like cats."], SearchConfig(beam_size=1))[0].sentences[0].output_ids


def test_what_cannot_be_converted_is_refused_in_one_line(tmp_path):
    blind = tiny_model(cross_attention=False, positional="none")
    with pytest.raises(RunLoadError, match=r"cannot export to CTranslate2: cross_attention=false .*; positional=none"):
        exportable(blind)
    result = subprocess.run([sys.executable, "scripts/export.py", str(tmp_path / "nowhere")], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "no such run folder" in result.stderr
    assert not (tmp_path / "nowhere").exists()


def test_translate_py_with_the_ctranslate2_engine(smoke_run, tmp_path):
    page, run = tmp_path / "sky.html", tmp_path / "run"
    shutil.copytree(smoke_run, run, ignore=shutil.ignore_patterns("ctranslate2*"))  # the shared run stays as it is
    args = [sys.executable, str(ROOT / "translate.py"), f"run={run}", "engine=ctranslate2", "beam_size=1"]
    first = subprocess.run([*args, "The sky is blue.", f"attention={page}"], cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "exporting" in first.stderr and (run / "ctranslate2" / "model.bin").is_file()  # exported on first use
    again = subprocess.run([*args, "The sky is blue."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "exporting" not in again.stderr and again.stdout == first.stdout  # not twice
    expected = Translator.load(run).translate(["The sky is blue."], SearchConfig(beam_size=1))[0].sentences[0]
    assert first.stdout == expected.text + "\n"
    sentence = explorer_data(page)["steps"][0]["sentences"][0]
    # The explorer shows the attention of the ids CTranslate2 produced, recomputed by our model.
    assert sentence["outputs"] == Translator.load(run).tokenizer.tgt_tokens(expected.output_ids)
