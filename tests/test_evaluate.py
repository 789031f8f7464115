"""scripts/evaluate.py against sacrebleu called directly."""

import json
import subprocess
import sys

import pytest
import sacrebleu

from helpers import ROOT
from scripts.evaluate import evaluate

HYPS = ["El gato duerme.", "Tengo hambre.", "¿Dónde está la estación?"]
REFS = [["El gato está durmiendo.", "El gato duerme."], ["Tengo hambre."], ["¿Dónde queda la estación?", "¿Dónde está la estación?", "¿La estación?"]]


def test_single_reference_matches_sacrebleu(tmp_path):
    (tmp_path / "hyp.txt").write_text("\n".join(HYPS) + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("\n".join(r[0] for r in REFS) + "\n", encoding="utf-8")
    scores = evaluate(tmp_path / "hyp.txt", tmp_path / "ref.txt")
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, [[r[0] for r in REFS]]).score)
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPS, [[r[0] for r in REFS]]).score)


@pytest.mark.parametrize("layout", ["tsv", "jsonl"])
def test_several_references_match_sacrebleu(tmp_path, layout):
    (tmp_path / "hyp.txt").write_text("\n".join(HYPS) + "\n", encoding="utf-8")
    refs_file = tmp_path / f"refs.{layout}"
    if layout == "tsv":
        rows = [f"source {i}\t{ref}" for i, refs in enumerate(REFS) for ref in refs]
        refs_file.write_text("\n".join(rows) + "\n", encoding="utf-8")
    else:
        refs_file.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in REFS) + "\n", encoding="utf-8")
    scores = evaluate(tmp_path / "hyp.txt", refs_file)
    streams = [[r[k] if k < len(r) else None for r in REFS] for k in range(3)]
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, streams).score)
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPS, streams).score)
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate.py"), str(tmp_path / "hyp.txt"),
                             str(refs_file)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "nrefs:var" in result.stdout and f"{scores.bleu:.2f}" in result.stdout


def test_line_count_mismatch_is_an_error(tmp_path):
    (tmp_path / "hyp.txt").write_text("a\nb\n")
    (tmp_path / "ref.txt").write_text("a\n")
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate.py"), str(tmp_path / "hyp.txt"),
                             str(tmp_path / "ref.txt")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "2 lines" in result.stderr


def test_text_in_capitals_is_scored_ignoring_case(tmp_path):
    (tmp_path / "hyp.txt").write_text("\n".join(h.upper() for h in HYPS) + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("\n".join(r[1 if len(r) > 1 else 0] for r in REFS) + "\n", encoding="utf-8")
    assert evaluate(tmp_path / "hyp.txt", tmp_path / "ref.txt").bleu < 10  # with case: the capitals miss
    assert evaluate(tmp_path / "hyp.txt", tmp_path / "ref.txt", lowercase=True).bleu == pytest.approx(100.0)
