"""data/copy_slots.py: which names and numbers become slots, masking and filling them, and the tokenizer's use."""

import pytest

from data.copy_slots import FILE, SLOT_TOKENS, CopySlots
from data.tokenizer import TranslationTokenizer

PAIRS = [("Tom lives in Boston.", "Tom vive en Boston."), ("Tom speaks English.", "Tom habla inglés."),
         ("Mary has 3 cats.", "Mary tiene tres gatos."), ("Mary was born in 1999.", "Mary nació en 1999."),
         ("I like English.", "Me gusta el inglés."), ("Boston is big.", "Boston es grande."),
         ("Where is Tom?", "¿Dónde está Tom?"), ("I have 530 cats.", "Tengo 530 gatos.")] * 20


@pytest.fixture(scope="module")
def slots() -> CopySlots:
    return CopySlots.learn(PAIRS)


def test_copied_names_and_unknown_words_are_slots_and_translated_words_stay(slots):
    assert slots.copied == {"Tom", "Mary", "Boston"}  # "English" is translated, "I" and "Where" too
    assert slots.entities("Tom met Katarzyna in Wroclaw in 1999, English.") == {
        "Tom": "<name1>", "Katarzyna": "<name2>", "Wroclaw": "<name3>", "1999": "<num1>"}
    assert slots.entities("Where is the cat?") == {}  # a sentence start the corpus knows is a word
    assert slots.entities("Ŀukasz and 张伟 paid 1,250 at 10:45, call 555-0199.") == {
        "Ŀukasz": "<name1>", "张伟": "<name2>", "1,250": "<num1>", "10:45": "<num2>", "555-0199": "<num3>"}


def test_masking_then_filling_gives_the_text_back(slots):
    for text in ["Katarzyna has 1 cat and 10 dogs, 1 more than Tom.", "Zoë-Ann paid 1,250 in 2019.", "No names."]:
        held = slots.entities(text)
        masked = slots.mask(text, held)
        assert not any(entity in masked for entity in held if not entity.isdigit() or len(entity) > 1)
        assert slots.restore(masked, held) == text
    held = slots.entities("Tom has 1 cat.")
    assert slots.mask("Tom has 1 cat.", held) == "<name1> has <num1> cat."  # "1" of "<name1>" is not a number
    assert slots.restore("Hola <name2> y <name1>.", {"Ana": "<name1>"}) == "Hola y Ana."  # an unknown slot goes


def test_a_training_pair_has_slots_only_for_what_both_sides_hold_verbatim(slots):
    held = slots.pair_slots("Tom and Mary have 3 cats and 1,530 dogs.", "Tom y María tienen tres gatos y 1,530 perros.")
    assert held == {"Tom": "<name1>", "1,530": "<num1>"}
    assert slots.pair_slots("Mary has 3 cats.", None) == {"Mary": "<name1>", "3": "<num1>"}  # no target: all


def test_the_tokenizer_reads_slots_as_single_tokens_and_fills_them_from_the_source(tmp_path):
    tokenizer = TranslationTokenizer.train(PAIRS, vocab_size=300, copy_slots=True)
    assert tokenizer.src_vocab_size == 300 and tokenizer.slots is not None  # the slots count in the size
    ids = tokenizer.encode_src(["Katarzyna has 530 cats."])[0]
    assert tokenizer.src_tokens(ids)[0] == "<name1>" and "<num1>" in tokenizer.src_tokens(ids)
    spanish = tokenizer.encode_tgt(["<name1> tiene <num1> gatos."])
    assert tokenizer.decode_tgt(spanish, ["Katarzyna has 530 cats."]) == ["Katarzyna tiene 530 gatos."]
    # Training pairs: a slot only where the target holds the entity; evaluation: every entity of the source.
    src, tgt = tokenizer.encode_pairs(["Mary has 3 cats."], ["Mary tiene tres gatos."], training=True)
    assert tokenizer.src_tokens(src[0])[0] == "<name1>" and "<num1>" not in tokenizer.src_tokens(src[0])
    src, _ = tokenizer.encode_pairs(["Mary has 3 cats."], ["Mary tiene tres gatos."], training=False)
    assert "<num1>" in tokenizer.src_tokens(src[0])
    assert tokenizer.src_tokens(tgt[0])[0] == "<name1>"

    saved = tokenizer.save(tmp_path / "run")
    assert [f.name for f in saved] == ["tokenizer.json", FILE]
    loaded = TranslationTokenizer.load(tmp_path / "run")
    assert loaded.slots.copied == tokenizer.slots.copied
    assert loaded.encode_src(["Katarzyna has 530 cats."]) == [ids]


def test_a_tokenizer_trained_without_slots_reads_names_as_text(tmp_path):
    plain = TranslationTokenizer.train(PAIRS, vocab_size=300)
    plain.save(tmp_path)  # a run folder of before: no copy_slots.json
    loaded = TranslationTokenizer.load(tmp_path)
    assert loaded.slots is None and not (tmp_path / FILE).exists()
    tokens = loaded.src_tokens(loaded.encode_src(["Katarzyna has 530 cats."])[0])
    assert not set(tokens) & set(SLOT_TOKENS) and "".join(tokens).startswith("Katarzyna")
    assert loaded.decode_tgt(loaded.encode_tgt(["Tom tiene 530 gatos."]), ["Tom has 530 cats."]) == \
        ["Tom tiene 530 gatos."]


def test_evaluation_reads_sources_as_translation_does_and_training_holds_slots(full_datamodule):
    dm, tokenizer = full_datamodule, full_datamodule.tokenizer
    for split in ("validation", "test"):  # every name and number a slot, whatever the references say
        src_ids = dm.splits[split].select(range(300))["src_ids"]
        assert src_ids == tokenizer.encode_src(dm.sources(split)[:300])
    name1, num1 = (tokenizer.src.token_to_id(token) for token in ("<name1>", "<num1>"))
    train = dm.splits["train"].select(range(5000))
    with_slot = [i for i, ids in enumerate(train["tgt_ids"]) if name1 in ids or num1 in ids]
    assert len(with_slot) > 500  # Tom, Mary, Boston, years ...: the model learns to copy slots
    assert all(name1 in train["src_ids"][i] or num1 in train["src_ids"][i] for i in with_slot)


# A synthetic Japanese→English corpus: a caseless source script, Latin names and numbers inside it.
CASELESS = [("私はTomです。", "I am Tom."), ("Tomは東京に住んでいます。", "Tom lives in Tokyo."),
            ("猫が3匹います。", "I have 3 cats."), ("ありがとう。", "Thank you."), ("東京は大きい。", "Tokyo is big."),
            ("Maryは1999年に生まれた。", "Mary was born in 1999."), ("これは本です。", "This is a book.")] * 10


def test_a_caseless_source_gets_slots_only_for_what_its_pairs_carry_verbatim():
    slots = CopySlots.learn(CASELESS)
    assert slots.caseless_source and slots.copied == {"Tom", "Mary"}
    # An unseen phrase of the source's own script is never a slot: nothing tells a name from a word there.
    assert slots.entities("田中さんは大阪に住んでいます。") == {}
    # Numbers are; Latin names inside the text are, cut where the script changes (私は · Tom · です).
    assert slots.entities("私はTomです。Oluwaseunは42歳。") == {"Tom": "<name1>", "Oluwaseun": "<name2>", "42": "<num1>"}
    held = slots.pair_slots("Tomは東京に住んでいます。", "Tom lives in Tokyo.")
    assert held == {"Tom": "<name1>"}
    assert CopySlots.mask("Tomは東京に住んでいます。", held) == "<name1>は東京に住んでいます。"
    assert CopySlots.restore("<name1> lives in Tokyo.", held) == "Tom lives in Tokyo."


def test_the_sources_script_is_saved_with_the_slots(tmp_path):
    CopySlots.learn(CASELESS).save(tmp_path)
    loaded = CopySlots.load(tmp_path)
    assert loaded.caseless_source and loaded.entities("田中さん") == {}
    CopySlots.learn(PAIRS).save(tmp_path)  # a cased source: a caseless word inside its text is foreign, a name
    assert not CopySlots.load(tmp_path).caseless_source and CopySlots.load(tmp_path).entities("I met 张伟.") == {
        "张伟": "<name1>"}
