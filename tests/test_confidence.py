"""model/confidence.py and the scores of model/search.py: a score per sentence, its flags, its marks."""

import json
import math
import random

import pytest
import torch

from helpers import BOS, EOS, PAD, tiny_model
from model.confidence import (AGREEMENT_CHAR_ORDER, MARKS, Calibration, Combination, agreement, beam_agreements,
                              calibrate, confidence, fit_combination, length_ratio, most_repeated, quantile, repeats)
from model.inference.run_folder import CALIBRATION_FILE, RunLoadError, read_calibration
from model.search import SearchConfig, search
from model.search_outputs import Output
from model.scoring.confidence_report import auroc, confidence_quality, save_calibration

CALIBRATION = Calibration(check_below=-0.8, wrong_below=-1.5, shortest_ratio=0.5, longest_ratio=2.0, sentences=100,
                          beam_size=5)


@pytest.fixture(scope="module")
def model_and_sources():
    model = tiny_model(30, seed=3)
    with torch.no_grad():
        model.output.weight[EOS] *= 3.5  # sentences end, at different steps
    torch.manual_seed(4)
    src = torch.randint(3, 30, (10, 9))
    for i in range(10):
        src[i, 3 + i % 6 :] = PAD
        src[i, 2 + i % 6] = EOS
    return model, src


@pytest.mark.parametrize("beam_size", [1, 4])
def test_the_score_is_the_mean_log_probability_of_the_output_recomputed_in_float64(model_and_sources, beam_size):
    model, src = model_and_sources
    outputs = search(model, src, BOS, EOS, SearchConfig(beam_size=beam_size))
    exact = tiny_model(30, seed=3).double()  # the same weights, in float64
    exact.load_state_dict(model.state_dict())
    exact = exact.double().eval()
    assert any(o.ids[-1] == EOS for o in outputs) and any(len(o.ids) > 3 for o in outputs)
    for row, output in enumerate(outputs):
        source = src[row : row + 1, : int((src[row] != PAD).sum())]
        tgt_in = torch.tensor([[BOS] + output.ids[:-1]])
        with torch.no_grad():
            log_probs = exact(source, tgt_in).log_softmax(dim=-1)[0]  # (T, vocab), float64
        forced = log_probs.gather(1, torch.tensor(output.ids)[:, None]).squeeze(1)
        torch.testing.assert_close(torch.tensor(output.token_log_probs, dtype=torch.float64), forced,
                                   atol=2e-5, rtol=1e-5)
        assert output.score == pytest.approx(forced.sum().item() / len(output.ids), abs=2e-5)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_without_scores_the_search_finds_the_same_outputs(model_and_sources, beam_size):
    model, src = model_and_sources
    config = SearchConfig(beam_size=beam_size)
    scored, plain = search(model, src, BOS, EOS, config), search(model, src, BOS, EOS, config, scores=False)
    assert [o.ids for o in plain] == [o.ids for o in scored]
    assert all(o.token_log_probs is None and o.score is None for o in plain)


def test_repeats_fire_on_a_loop_and_not_on_what_the_source_repeats():
    loop = [5, 6, 7] * 4 + [EOS]
    assert most_repeated(loop, 3) == 4 and repeats([8, 9, 10, 11, 12, EOS], loop)
    assert not repeats([8, 9] * 4 + [EOS], [5, 6] * 4 + [EOS])  # "very, very, very": the source says it too
    assert not repeats([8, 9, 10, 11, EOS], [5, 5, 6, 7, 5, 8, EOS])  # a word twice is no loop
    assert most_repeated([5], 2) == 0


def test_a_model_forced_to_repeat_is_flagged_and_marked_likely_wrong():
    model = tiny_model(30, seed=3)
    with torch.no_grad():  # every step prefers token 7 by far: the output loops and never ends
        model.output.bias = torch.nn.Parameter(torch.zeros(30))
        model.output.bias[7] = 50.0
    src = torch.tensor([[5, 9, 11, 12, EOS]])
    output = search(model, src, BOS, EOS, SearchConfig(beam_size=1))[0]
    assert output.ids[:5] == [7] * 5 and EOS not in output.ids
    found = confidence(src[0].tolist(), output, EOS, calibration=CALIBRATION)
    assert found.repeats and found.length and found.mark == "likely wrong"
    assert found.score > CALIBRATION.check_below  # sure of itself: the score alone would not catch it


def test_length_flags_an_output_cut_short_or_run_long_and_marks_follow_the_thresholds():
    source = list(range(3, 23)) + [EOS]  # 21 tokens
    short = Output([5, 6, EOS], [-0.1, -0.1, -0.1], -0.3)
    assert length_ratio(source, short.ids) < CALIBRATION.shortest_ratio
    assert confidence(source, short, EOS, calibration=CALIBRATION).flags == ["length"]
    assert confidence(source, short, EOS).flags == []  # no calibration: no band to leave
    usual = list(range(3, 25)) + [EOS]
    marks = [confidence(source, Output(usual, None, score * len(usual)), EOS, calibration=CALIBRATION).mark
             for score in (-0.2, -1.0, -2.0)]
    assert marks == list(MARKS)
    assert confidence(source, Output(usual, None, -0.1), EOS, cut=True, calibration=CALIBRATION).mark == "likely wrong"
    assert confidence(source, Output(usual), EOS, calibration=CALIBRATION).mark is None  # an engine without scores


def test_calibration_sets_the_quantiles_and_is_read_back(tmp_path):
    scores = [-i / 100 for i in range(101)]
    found = calibrate(scores, [1.0] * 50 + [0.2] + [3.0] + [1.1] * 49, beam_size=4)
    assert (found.check_below, found.wrong_below) == (quantile(scores, 0.3), quantile(scores, 0.1)) == (-0.7, -0.9)
    assert found.sentences == 101 and found.beam_size == 4
    assert read_calibration(tmp_path) is None  # a run from before: scores without marks
    save_calibration(tmp_path, found)
    assert read_calibration(tmp_path) == found
    for broken in ({"check_below": "low"}, {**vars(found), "wrong_below": float("nan")}):
        (tmp_path / CALIBRATION_FILE).write_text(json.dumps(broken))
        with pytest.raises(RunLoadError, match="confidence.json: unreadable calibration"):
            read_calibration(tmp_path)
    with pytest.raises(ValueError, match="calibrating needs scores and length ratios"):
        calibrate([], [], 1)


def test_auroc_is_the_share_of_bad_good_pairs_ranked_right():
    rng = random.Random(0)
    scores = [rng.choice([-2.0, -1.0, -0.5, 0.0]) + rng.random() * (i % 2) for i in range(60)]  # with ties
    bad = [rng.random() < 0.3 for _ in scores]
    pairs = [(b, g) for b, bad_b in zip(scores, bad) if bad_b for g, bad_g in zip(scores, bad) if not bad_g]
    expected = sum(1.0 if b < g else 0.5 if b == g else 0.0 for b, g in pairs) / len(pairs)
    assert auroc(scores, bad) == pytest.approx(expected)
    assert auroc([0.0, 1.0], [True, False]) == 1.0 and auroc([1.0], [True]) is None


def test_the_quality_report_counts_marks_against_sentence_chrf():
    references = [["el gato come pescado"], ["la casa es grande"], ["hoy llueve mucho"]]
    hypotheses = ["el gato come pescado", "xyz qwerty", "hoy llueve mucho"]
    found = [confidence([5, EOS], Output([5, 6, EOS], None, 3 * score), EOS, calibration=CALIBRATION)
             for score in (-0.1, -2.0, -1.0)]
    quality = confidence_quality(found, hypotheses, references, "es")
    assert quality["auroc_chrf_below_30"] == 1.0 and quality["bad_share"] == pytest.approx(1 / 3, abs=1e-3)
    assert quality["likely_wrong"] == {"share": pytest.approx(1 / 3, abs=1e-3), "precision": 1.0, "recall": 1.0}
    assert quality["check_or_likely_wrong"]["precision"] == 0.5
    assert quality["flags_on_good"] == {"sentences": 2, "repeats": 0.0, "length": 0.0, "any": 0.0}
    assert math.isfinite(quality["auroc_bleu_below_20"])
    assert quality["ranked_by"] == "score" and quality["auroc_chrf_below_30_alone"] == {"score": 1.0}
    combining = Calibration(**{**vars(CALIBRATION), "combination": Combination(-1.0, 0.5, 50.0, 10.0, -0.5, -1.0)})
    agreeing = [confidence([5, EOS], Output([5, 6, EOS], None, 3 * score), EOS, calibration=combining, agreement=found)
                for score, found in ((-1.0, 90.0), (-0.1, 10.0), (-1.0, 50.0))]  # sums 4, -2.2, 0: the order turned
    quality = confidence_quality(agreeing, hypotheses, references, "es")
    assert quality["ranked_by"] == "combined" and quality["auroc_chrf_below_30"] == 1.0
    assert quality["auroc_chrf_below_30_alone"] == {"score": 0.0, "agreement": 1.0}


def test_agreement_is_the_mean_chrf_of_the_translation_against_each_other_hypothesis():
    from sacrebleu.metrics import CHRF

    chrf = CHRF(char_order=AGREEMENT_CHAR_ORDER)
    others = ["el gato come pescado", "un perro come carne", "la casa"]
    expected = sum(chrf.sentence_score("el gato come carne", [other]).score for other in others) / 3
    assert agreement("el gato come carne", others) == pytest.approx(expected)
    assert agreement("el gato", ["el gato", "el gato"]) == 100.0 and agreement("el gato", []) is None
    decoded = []

    def decode(ids: list[list[int]]) -> list[str]:  # ids to words; what was asked is kept
        decoded.extend(ids)
        return [" ".join(f"w{i}" for i in seq) for seq in ids]

    outputs = [Output([5, 6, EOS], alternatives=[[5, 6, EOS], [5, 7, EOS]]), Output([8, EOS]),
               Output([9, EOS], alternatives=[[9, 9]])]
    found = beam_agreements(outputs, decode)
    assert found == [pytest.approx(agreement("w5 w6 w2", ["w5 w6 w2", "w5 w7 w2"])), None,
                     pytest.approx(agreement("w9 w2", ["w9 w9"]))]
    assert decoded == [[5, 6, EOS], [5, 6, EOS], [5, 7, EOS], [9, EOS], [9, 9]]  # in one call, none for greedy


def test_the_combination_is_the_sum_of_standard_scores_recomputed_in_float64():
    rng = random.Random(1)
    scores, found = [-rng.random() for _ in range(200)], [100 * rng.random() for _ in range(200)]
    combination = fit_combination(scores, found)
    scores64, found64 = torch.tensor(scores, dtype=torch.float64), torch.tensor(found, dtype=torch.float64)
    standard = ((scores64 - scores64.mean()) / scores64.std(unbiased=False)
                + (found64 - found64.mean()) / found64.std(unbiased=False))
    for score, value, exact in zip(scores, found, standard.tolist()):
        assert combination.combined(score, value) == pytest.approx(exact, abs=1e-9)
    ordered = sorted(standard.tolist())
    assert combination.check_below == pytest.approx(ordered[round(0.3 * 199)], abs=1e-9)
    assert combination.wrong_below == pytest.approx(ordered[round(0.1 * 199)], abs=1e-9)
    assert fit_combination([-1.0, -0.5], [100.0, 100.0]).agreement_std == 1.0  # all alike: no division by zero
    ratios = [1.0] * 200
    assert calibrate(scores, ratios, 4, found).combination == combination
    assert calibrate(scores, ratios, 4, [None] + found[1:]).combination is None  # one without: the score alone
    assert calibrate(scores, ratios, 4).combination is None
    with pytest.raises(ValueError, match="spreads must be positive"):
        Combination(-0.5, 0.0, 80.0, 10.0, -0.5, -2.0)


def test_marks_read_score_and_agreement_together_where_both_are_known():
    combination = Combination(score_mean=-0.5, score_std=0.25, agreement_mean=80.0, agreement_std=10.0,
                              check_below=-0.5, wrong_below=-2.0)
    calibration = Calibration(**{**vars(CALIBRATION), "combination": combination})
    source, usual = list(range(3, 23)) + [EOS], list(range(3, 25)) + [EOS]
    sure = Output(usual, None, -0.5 * len(usual))  # an average score (and above CALIBRATION's check_below)
    marks = [confidence(source, sure, EOS, calibration=calibration, agreement=found) for found in (95.0, 70.0, 55.0)]
    assert [found.mark for found in marks] == list(MARKS)  # sums 1.5, -1, -2.5
    assert [found.combined for found in marks] == [pytest.approx(1.5), pytest.approx(-1.0), pytest.approx(-2.5)]
    assert marks[2].agreement == 55.0
    alone = confidence(source, sure, EOS, calibration=calibration)  # greedy, or an engine without alternatives
    assert alone.mark == "fine" and alone.combined is None
    looping = Output([7] * 12 + [EOS], None, -0.1)
    assert confidence(source, looping, EOS, calibration=calibration, agreement=99.0).mark == "likely wrong"


def test_a_combined_calibration_is_read_back_and_one_from_before_still_reads(tmp_path):
    combining = Calibration(**{**vars(CALIBRATION), "combination": Combination(-0.4, 0.2, 78.0, 11.0, -0.5, -2.1)})
    save_calibration(tmp_path, combining)
    assert read_calibration(tmp_path) == combining
    before = {name: value for name, value in vars(CALIBRATION).items() if name != "combination"}
    (tmp_path / CALIBRATION_FILE).write_text(json.dumps(before))  # written before the agreement
    assert read_calibration(tmp_path) == CALIBRATION and CALIBRATION.combination is None
    for broken in ("low", {**vars(combining.combination), "score_std": float("nan")}, {"score_mean": 1.0},
                   {**vars(combining.combination), "agreement_std": 0.0}):
        (tmp_path / CALIBRATION_FILE).write_text(json.dumps({**vars(CALIBRATION), "combination": broken}))
        with pytest.raises(RunLoadError, match="confidence.json: unreadable calibration"):
            read_calibration(tmp_path)
    (tmp_path / CALIBRATION_FILE).write_text("[1, 2]")
    with pytest.raises(RunLoadError, match="confidence.json: unreadable calibration"):
        read_calibration(tmp_path)
