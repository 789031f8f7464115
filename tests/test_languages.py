"""data/languages.py: the pair named once, and its journey from the data settings to every view of a run."""

import json
import os
import pty
import shutil
import subprocess
import sys

import pytest
import yaml

from data.languages import LanguagePair, download_language, pair_of, pair_problems
from helpers import ROOT, train_in_process
from model.inference.model_card import model_card
from model.inference.run_folder import run_settings
from model.inference.translator import Translator
from model.views.explorer import sentence_record

NUMBERS = ["один", "два", "три", "четыре", "пять", "шесть", "семь", "восемь"]
ENGLISH = ["one", "two", "three", "four", "five", "six", "seven", "eight"]
NAMES = ["Иван", "Мария", "Олег", "Анна"]
ANIMALS = [("кошку", "a cat"), ("собаку", "a dog"), ("птицу", "a bird"), ("рыбу", "a fish")]


def test_a_pair_is_named_and_checked_once():
    pair = LanguagePair("nl", "en")
    assert pair.describe() == "Dutch→English" and pair.names == ("Dutch", "English") and pair.codes == "nl-en"
    assert pair.tatoeba_names() == ("nld-eng.zip", "nld.txt", "nld-eng/nld.txt") == LanguagePair("en", "nl").tatoeba_names()
    assert LanguagePair("fr", "de").tatoeba_names() == ()  # manythings pairs everything with English
    assert download_language("nld-eng.zip") == download_language("nld-eng/nld.txt") == "nl"
    assert download_language("spa.txt") == "es" and download_language("pairs.tsv") is None
    assert LanguagePair("xx", "en").describe() == "xx→English"  # a code the table lacks names itself
    assert pair_of(None) == pair_of({"max_sentence_len": 64}) == LanguagePair("en", "es")  # a run from before
    assert pair_problems("en", "en") == ["source_lang and target_lang are both 'en': a pair needs two languages"]
    assert pair_problems("English", 7, "data.") == [
        "data.source_lang='English' must be a language code such as en, es, nl (ISO 639-1)",
        "data.target_lang=7 must be a language code such as en, es, nl (ISO 639-1)"]


@pytest.fixture(scope="module")
def russian_run(tmp_path_factory):
    """A smoke run trained Russian→English on two aligned files made here (``corpus.ru`` + ``corpus.en``)."""
    folder = tmp_path_factory.mktemp("russian")
    ru, en = [], []
    for i, (number, english) in enumerate(zip(NUMBERS * 25, ENGLISH * 25)):
        name, (animal, animal_en) = NAMES[i % len(NAMES)], ANIMALS[(i // 8) % len(ANIMALS)]
        ru.append(f"{name} видит {animal} номер {i}.")
        en.append(f"{name} sees {animal_en} number {i}.")
        ru.append(f"У меня {number} {'кошки' if i % 2 else 'собаки'}.")
        en.append(f"I have {english} {'cats' if i % 2 else 'dogs'}.")
    (folder / "corpus.ru").write_text("\n".join(ru) + "\n", encoding="utf-8")
    (folder / "corpus.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    run = folder / "run"
    train_in_process(run, folder / "cache", f"data.corpus_path={folder / 'corpus'}", "data.source_lang=ru",
                     "data.target_lang=en", "data.vocab_size=400", "trainer.max_steps=20",
                     "trainer.val_check_interval=10", "data.val_fraction=0.05", "data.test_fraction=0.05")
    return run


def test_the_run_folder_records_the_pair_and_the_test_report_speaks_it(russian_run):
    assert run_settings(russian_run).pair == LanguagePair("ru", "en")
    assert run_settings(russian_run).corpus == "corpus"
    metrics = json.loads((russian_run / "test_metrics.json").read_text())
    assert metrics["pair"] == "ru-en" and "tok:13a" in metrics["bleu_signature"]
    assert metrics["copied"] is None  # the copy check's sentences are English: not run on a Russian source
    sources = [line.split("\t")[0] for line in (russian_run / "test_translations.tsv").read_text().splitlines()]
    assert sources and all(any("а" <= ch <= "я" for ch in s) for s in sources)  # the test split reads Russian


def test_the_pair_reaches_the_model_card_the_page_and_the_explorer(russian_run, tmp_path):
    translator = Translator.load(russian_run)
    card = model_card(translator.model, translator.settings, translator.files.checkpoint, tmp_path)
    assert "language:\n- ru\n- en\n" in card and "# Russian→English, a Transformer" in card
    assert "name: Translation Russian to English" in card and "corpus (Russian–English), split by Russian" in card
    assert "Spanish" not in card and "English+Spanish" not in card
    example = card.split("batch = tokenizer(")[1].split(", return_tensors")[0]
    assert all(any("а" <= ch <= "я" for ch in s) for s in json.loads(example))  # its example is Russian
    translation = translator.translate(["Иван видит кошку номер 3."])[0]
    assert sentence_record(translator.sentence_view(translation.sentences[0]))["languages"] == ["Russian", "English"]
    from fastapi.testclient import TestClient

    from serving.server import create_app

    with TestClient(create_app(translator)) as client:
        page = client.get("/").text
        docs = client.get("/openapi.json").json()["info"]
    assert "<h1>Russian → English, and the attention behind it</h1>" in page and 'lang="ru"' in page
    assert "The sky is blue." not in page and "Spanish" not in page
    assert docs["title"] == "Attention, from scratch: Russian→English" and "Translate Russian to English" in docs["description"]


def test_translate_py_says_the_runs_pair_to_someone_typing(russian_run):
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, str(ROOT / "translate.py"), f"run={russian_run}", "device=cpu"],
                               stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, text=True)
    os.close(terminal)
    os.write(controller, "Иван видит кошку.\n\x04".encode())
    out, err = process.communicate(timeout=120)
    os.close(controller)
    assert process.returncode == 0, err
    assert "translate.py: Russian→English: type Russian sentences, one a line; Ctrl-D ends" in err
    assert len(out.splitlines()) == 1  # stdout: the translation only
    help_text = subprocess.run([sys.executable, str(ROOT / "translate.py"), "--help"], capture_output=True,
                               text=True, cwd=ROOT).stdout
    assert "data.source_lang and\ndata.target_lang of its config.yaml" in help_text


def test_a_run_from_before_the_pair_reads_as_english_to_spanish(russian_run, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(russian_run, old)
    config = yaml.safe_load((old / "config.yaml").read_text())
    del config["data"]["source_lang"], config["data"]["target_lang"]
    (old / "config.yaml").write_text(yaml.safe_dump(config))
    assert run_settings(old).pair == LanguagePair("en", "es")
    # Only the names change: the same model, tokenizer and search give the very translation the run gives.
    lines = ["Иван видит кошку.", "У меня три собаки."]
    texts = [t.text for t in Translator.load(old).translate(lines)]
    assert all(texts) and texts == [t.text for t in Translator.load(russian_run).translate(lines)]
