"""model/inference/export_transformers.py: a run as a Pegasus folder that `transformers` loads in a process that
never imports this project: the same token ids, the same logits, the same greedy and (alpha = 0) beam outputs;
what Pegasus cannot express refused in one line; the card's scores the run's."""

import json
import subprocess
import sys

import pytest
import torch

from helpers import tiny_model
from model.inference.export import exportable
from model.inference.run_folder import RunLoadError
from model.inference.search_backends import output_limit
from model.inference.translator import Translator
from model.search import SearchConfig

transformers = pytest.importorskip("transformers", reason="pip install -e \".[hub]\" brings transformers")

# No names or numbers: our translator reads those as copy slots, generate() on raw text as words (the card says so).
SENTENCES = ["I like cats.", "Where is the station?", "He is very tall.", "It is late.", "The sky is blue today."]

# Run in a fresh interpreter, in an empty folder: only transformers and the exported folder.
FRESH = r"""
import json, sys
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
asked = json.loads(sys.stdin.read())
tokenizer = AutoTokenizer.from_pretrained(asked["folder"])
model = AutoModelForSeq2SeqLM.from_pretrained(asked["folder"]).eval()
# What the model card asks of a caller: the first word lowered where truecase.json lists it, the capital given back.
lower = set(json.load(open(asked["folder"] + "/truecase.json", encoding="utf-8"))["src"])
def read(sentence):
    first, space, rest = sentence.partition(" ")
    return (first.lower() if first.lower() in lower else first) + space + rest
ids = [tokenizer(read(s))["input_ids"] for s in asked["sentences"]]
with torch.no_grad():
    logits = [model(input_ids=torch.tensor([i]), decoder_input_ids=torch.tensor([d])).logits[0].tolist()
              for i, d in zip(ids, asked["decoder_inputs"])]
    searched = {}
    for name, beams in (("greedy", 1), ("beam", 4)):
        searched[name] = [model.generate(torch.tensor([i]), num_beams=beams, length_penalty=0.0, do_sample=False,
                                         max_length=limit + 1, early_stopping=True)[0, 1:].tolist()
                          for i, limit in zip(ids, asked["limits"])]
ours = sorted(name for name in sys.modules if name.split(".")[0] in ("model", "data", "serving"))
print(json.dumps({"ids": ids, "logits": logits, "searched": searched, "ours": ours,
                  "decoded": [d[:1].upper() + d[1:] for d in tokenizer.batch_decode(searched["greedy"],
                                                                                      skip_special_tokens=True)]}))
"""


@pytest.fixture(scope="module")
def exported(smoke_run, tmp_path_factory):
    from model.inference.export_transformers import export_transformers

    ours = Translator.load(smoke_run, device="cpu")
    folder = tmp_path_factory.mktemp("hub") / "en-es"
    return ours, export_transformers(ours.model, ours.tokenizer, ours.settings, ours.files.checkpoint, folder)


def test_a_fresh_process_without_this_project_gets_our_ids_logits_and_outputs(exported, tmp_path):
    ours, folder = exported
    ids = ours.encode(SENTENCES)
    greedy = ours.translate(SENTENCES, SearchConfig(beam_size=1))
    decoder_inputs = [[ours.tokenizer.bos_id] + t.sentences[0].output_ids[:-1] for t in greedy]
    config = SearchConfig(beam_size=4, length_penalty=0.0)
    asked = {"folder": str(folder), "sentences": SENTENCES, "decoder_inputs": decoder_inputs,
             "limits": [output_limit(i, config, ours.model.max_len) for i in ids]}
    result = subprocess.run([sys.executable, "-I", "-c", FRESH], input=json.dumps(asked), cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = json.loads(result.stdout)
    assert theirs["ours"] == [] and theirs["ids"] == ids  # nothing of this project was imported
    with torch.no_grad():
        for i, d, logits in zip(ids, decoder_inputs, theirs["logits"]):
            expected = ours.model(torch.tensor([i]), torch.tensor([d]))[0]
            assert (torch.tensor(logits) - expected).abs().max() < 1e-4
    assert theirs["searched"]["greedy"] == [t.sentences[0].output_ids for t in greedy]
    assert theirs["decoded"] == [t.text for t in greedy]
    assert theirs["searched"]["beam"] == [t.sentences[0].output_ids for t in ours.translate(SENTENCES, config)]


def test_engine_transformers_is_a_search_behind_the_same_translator(exported, smoke_run, tmp_path):
    import shutil

    ours, _ = exported
    run = tmp_path / "run"
    shutil.copytree(smoke_run, run, ignore=shutil.ignore_patterns("ctranslate2*", "transformers*"))
    theirs = Translator.load(run, device="cpu", engine="transformers")  # exports the run first
    assert (run / "transformers" / "model.safetensors").is_file()
    greedy = SearchConfig(beam_size=1)
    lines = ["", *SENTENCES[:3], "   "]
    assert [t.text for t in theirs.translate(lines, greedy)] == [t.text for t in ours.translate(lines, greedy)]
    line = theirs.translate(SENTENCES[:1], SearchConfig(beam_size=3))[0]
    assert len(theirs.n_best(line, SearchConfig(beam_size=3))) == 3
    best = line.sentences[0]
    assert theirs.sentence_view(best).attention.output_ids == best.output_ids  # the attention stays ours


def test_the_card_says_the_runs_scores_and_how_to_load_it(exported, smoke_run):
    _, folder = exported
    card = (folder / "README.md").read_text(encoding="utf-8")
    scores = json.loads((smoke_run / "test_metrics.json").read_text())
    assert card.startswith("---\nlanguage:\n- en\n- es\n") and "library_name: transformers" in card
    assert f"value: {scores['bleu']:.2f}" in card and f"value: {scores['chrf']:.2f}" in card
    assert scores["bleu_signature"] in card and "AutoModelForSeq2SeqLM.from_pretrained" in card
    assert "python train.py" in card and "CC-BY 2.0 FR" in card
    assert "are listed in `truecase.json`" in card and (folder / "truecase.json").is_file()  # the caller's two steps


@pytest.mark.parametrize("variant, refused", [
    ({"norm_first": False}, "norm_first=false"), ({"positional": "learned"}, "positional=learned"),
    ({"positional": "none"}, "positional=none"), ({"cross_attention": False}, "cross_attention=false"),
    ({"causal_decoder": False}, "causal_decoder=false"), ({"share_embeddings": False}, "separate source and target"),
])
def test_what_pegasus_cannot_express_is_refused_in_one_line(variant, refused):
    model = tiny_model(**({"share_embeddings": True} | variant))
    with pytest.raises(RunLoadError, match=f"^cannot export to transformers: .*{refused}"):
        exportable(model, "transformers")


def test_hub_check_scores_generate_on_raw_text_beside_translate_py(exported, smoke_run, capsys, monkeypatch, tmp_path):
    from scripts import hub_check

    _, folder = exported
    monkeypatch.setattr(sys, "argv", ["hub_check.py", str(smoke_run), "--folder", str(folder)])
    assert hub_check.main() == 0
    out = capsys.readouterr().out
    assert f"{len(hub_check.read_rows(smoke_run))} test sentences" in out
    scored = [line for line in out.splitlines() if "BLEU" in line]
    assert len(scored) == 2 and "translate.py" in scored[0] and "generate()" in scored[1]
    bleu = json.loads((smoke_run / "test_metrics.json").read_text())["bleu"]
    assert f"BLEU {bleu:5.2f}" in scored[0]  # translate.py's translations are the run's own test output
    monkeypatch.setattr(sys, "argv", ["hub_check.py", str(smoke_run), "--folder", str(tmp_path / "none")])
    assert hub_check.main() == 2 and "--to transformers" in capsys.readouterr().err  # one line: how to make it
