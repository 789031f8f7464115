"""data/tokenizer.py: byte-level BPE round trips, special ids, save/load, train-only vocabulary."""

import pytest

from data.datamodule import TranslationDataModule
from data.tokenizer import TranslationTokenizer


def test_round_trip_on_train_sentences(full_datamodule):
    tokenizer, train = full_datamodule.tokenizer, full_datamodule.splits["train"]
    for column, encode in (("src", tokenizer.src.encode_batch), ("tgt", tokenizer.tgt.encode_batch)):
        texts = train[column]
        decoded = tokenizer.tgt.decode_batch([e.ids for e in encode(texts)])
        exact = sum(d == t for d, t in zip(decoded, texts)) / len(texts)
        assert exact >= 0.999, (column, exact)


def test_accents_inverted_marks_and_spacing_survive(full_datamodule):
    tokenizer = full_datamodule.tokenizer
    for text in ["¿Dónde está el niño?", "¡Qué  año tan extraño!", "Pingüino, señor.", "  leading", "日本 🙂"]:
        assert tokenizer.decode_tgt(tokenizer.encode_tgt([text])) == [text]
    assert tokenizer.unk_id not in tokenizer.encode_src(["日本 🙂 ☃"])[0]  # bytes, never unknown


def test_special_ids_and_source_eos(full_datamodule):
    tokenizer = full_datamodule.tokenizer
    assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id) == (0, 1, 2, 3)
    assert tokenizer.encode_src(["Hi."])[0][-1] == tokenizer.eos_id
    assert tokenizer.src_vocab_size == 8000


def letters(n: int) -> str:
    """0 -> 'qaaa', 1 -> 'qaab', ...: a distinct letters-only word per number, all of one length
    (so that no word's token is a piece of another's)."""
    return "q" + "".join(chr(ord("a") + n // 26**p % 26) for p in (2, 1, 0))


def test_tokenizer_never_sees_validation_or_test(tmp_path):
    # Every sentence has its own word, three times: seen in training, BPE merges it into one token.
    path = tmp_path / "spa.txt"
    rows = [f"{letters(i)} {letters(i)} {letters(i)} here.\taquí {letters(i)} {letters(i)}." for i in range(200)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    dm = TranslationDataModule(corpus_path=str(path), cache_dir=str(tmp_path / "cache"), vocab_size=3000,
                               val_fraction=0.1, test_fraction=0.1)
    dm.setup()
    vocabulary = dm.tokenizer.src.get_vocab()

    def merged(sentence: str) -> bool:
        return "Ġ" + sentence.split()[0] in vocabulary  # the sentence's own word, as one token

    held_out = list(dm.splits["validation"]["src"]) + list(dm.splits["test"]["src"])
    assert len(held_out) >= 20 and not any(merged(s) for s in held_out)
    assert all(merged(s) for s in dm.splits["train"]["src"])  # so the check above can fail


@pytest.mark.parametrize("joint", [True, False])
def test_save_and_load(tmp_path, joint):
    pairs = [("hello world", "hola mundo"), ("good night", "buenas noches")] * 20
    tokenizer = TranslationTokenizer.train(pairs, vocab_size=300, joint=joint)
    files = tokenizer.save(tmp_path)
    assert [f.name for f in files] == (["tokenizer.json"] if joint else ["tokenizer.src.json", "tokenizer.tgt.json"]) \
        + ["truecase.json"]
    loaded = TranslationTokenizer.load(tmp_path)
    assert loaded.joint == joint
    assert loaded.encode_src(["hello night"]) == tokenizer.encode_src(["hello night"])
    with pytest.raises(FileNotFoundError, match="no tokenizer"):
        TranslationTokenizer.load(tmp_path / "empty")


def test_digits_are_tokens_of_their_own_and_a_tokenizer_trained_before_keeps_its_merges(tmp_path):
    pairs = [("I have 530 cats and 531 dogs.", "Tengo 530 gatos y 531 perros."), ("In 1987.", "En 1987.")] * 40
    digits = TranslationTokenizer.train(pairs, vocab_size=300, split_digits=True)
    merged = TranslationTokenizer.train(pairs, vocab_size=300)  # the default, as runs were trained before
    tokens = digits.src_tokens(digits.encode_src(["I have 530 cats."])[0])
    assert tokens[2:6] == ["▁", "5", "3", "0"]
    assert any(len(token.strip("▁")) > 1 and token.strip("▁").isdigit()
               for token in merged.src_tokens(merged.encode_src(["I have 530 cats."])[0]))
    for tokenizer in (digits, merged):  # each decodes its own ids back to the text
        assert tokenizer.decode_tgt(tokenizer.encode_tgt(["Tengo 1,250 gatos a las 10:45."])) == \
            ["Tengo 1,250 gatos a las 10:45."]
    merged.save(tmp_path)  # a run folder of before: its tokenizer.json still splits as it did
    loaded = TranslationTokenizer.load(tmp_path)
    assert loaded.encode_src(["I have 530 cats."]) == merged.encode_src(["I have 530 cats."])


def test_a_word_keeps_its_capital_in_sentence_case_where_the_training_text_writes_it_so():
    pairs = [("I live in London with Tom.", "Vivo en Londres con Tom."), ("We could go to London.", "Podríamos ir."),
             ("Could you come? I could not.", "¿Podrías venir? No pude."), ("Tom could swim.", "Tom sabía nadar.")]
    tokenizer = TranslationTokenizer.train(pairs * 50, vocab_size=400, copy_slots=True)
    assert tokenizer.capitalized_inside("London") and tokenizer.capitalized_inside("Tom")  # one piece; copied
    assert tokenizer.capitalized_inside("I")  # as many pieces either way, and held capitalized inside a sentence
    assert not tokenizer.capitalized_inside("Could") and not tokenizer.capitalized_inside("Swim")
    assert tokenizer.knows("LONDON") and not tokenizer.knows("Paris")
