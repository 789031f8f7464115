"""model/training/metrics.py: BLEU tokenized for the target language (``data.languages.bleu_tokenizer``), the
signature saying how."""

import importlib.util
import logging

from data import languages
from data.languages import bleu_tokenizer
from model.training.metrics import corpus_scores


def test_text_without_spaces_is_scored_with_its_own_tokenizer():
    # One character of five differs: 13a sees one "word" per sentence and scores nothing; zh scores the rest.
    hypotheses, references = ["我喜欢猫。"] * 2, [["我喜欢狗。"], ["我喜欢狗。"]]
    assert corpus_scores(hypotheses, references, "en").bleu == 0.0
    chinese = corpus_scores(hypotheses, references, "zh")
    assert chinese.bleu > 30 and "tok:zh" in chinese.bleu_signature
    assert "tok:13a" in corpus_scores(["Hallo."], [["Hallo."]], "nl").bleu_signature
    assert "tok:char" in corpus_scores(["สวัสดี"], [["สวัสดี"]], "th").bleu_signature


def test_japanese_without_mecab_falls_back_to_characters_and_says_so_once(monkeypatch, caplog):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(languages.importlib.util, "find_spec", lambda name: None if name == "MeCab" else real_find_spec(name))
    bleu_tokenizer.cache_clear()
    try:
        with caplog.at_level(logging.WARNING):
            assert bleu_tokenizer("ja") == bleu_tokenizer("ja") == "char"
            assert "tok:char" in corpus_scores(["猫が好き"], [["猫が好き"]], "ja").bleu_signature
        said = [r.getMessage() for r in caplog.records if "ja-mecab" in r.getMessage()]
        assert said == ["BLEU on ja text uses sacreBLEU's char tokenizer: its ja-mecab tokenizer needs the MeCab package"]
        monkeypatch.setattr(languages.importlib.util, "find_spec", lambda name: object())  # as if installed
        bleu_tokenizer.cache_clear()
        assert bleu_tokenizer("ja") == "ja-mecab" and bleu_tokenizer("ko") == "ko-mecab"
    finally:
        bleu_tokenizer.cache_clear()
