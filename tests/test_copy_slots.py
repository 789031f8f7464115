"""data/copy_slots.py: which names and numbers become slots, masking and filling them, and the tokenizer's use."""

import json

import pytest

from data.copy_slots import FILE, SLOT_TOKENS, SLOTS_PER_KIND, CopySlots
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
    source, target = "Tom and Mary have 3 cats and 1,530 dogs.", "Tom y María tienen tres gatos y 1,530 perros."
    held = slots.pair_slots(source, target)
    assert held == slots.pair_slots(source, target)  # the pair's own draw: the same every time
    assert set(held) <= {"Tom", "1,530"} and all(slot in SLOT_TOKENS for slot in held.values())
    assert slots.pair_slots("Mary has 3 cats.", None) == {"Mary": "<name1>", "3": "<num1>"}  # no target: all


def test_a_share_of_training_pairs_keeps_its_names_as_text_and_a_share_is_numbered_at_random(slots):
    numbers = [f"{n}{n}" for n in range(1, 10)]
    lists = [(a, b, c) for a in numbers for b in numbers for c in numbers if a < b < c]  # 84 pairs
    made = [slots.pair_slots(f"Tom has {a}, {b} and {c} cats.", f"Tom tiene {a}, {b} y {c} gatos.")
            for a, b, c in lists]
    assert 0.15 < sum(not held for held in made) / len(made) < 0.45  # three in ten keep their text
    in_order = sum(list(held.values()) == ["<name1>", "<num1>", "<num2>", "<num3>"] for held in made)
    assert in_order > 0.2 * len(made)  # of the rest, half numbered 1, 2, 3 ...
    drawn = [[int(slot[4:-1]) for slot in held.values() if slot.startswith("<num")] for held in made if held]
    assert all(list(held) == ["Tom", *abc] for held, abc in zip(made, lists) if held)  # source order
    assert all(nums == sorted(nums) and max(nums) <= SLOTS_PER_KIND for nums in drawn)  # increasing, in range
    assert sum(max(nums) > 3 for nums in drawn) > 0.2 * len(made)  # ... and half from all the slots


def test_the_tokenizer_reads_slots_as_single_tokens_and_fills_them_from_the_source(tmp_path):
    tokenizer = TranslationTokenizer.train(PAIRS, vocab_size=300, copy_slots=True)
    assert tokenizer.src_vocab_size == 300 and tokenizer.slots is not None  # the slots count in the size
    ids = tokenizer.encode_src(["Katarzyna has 530 cats."])[0]
    assert tokenizer.src_tokens(ids)[:2] == ["▁", "<name1>"] and "<num1>" in tokenizer.src_tokens(ids)  # its space
    spanish = tokenizer.encode_tgt(["<name1> tiene <num1> gatos."])
    assert tokenizer.decode_tgt(spanish, ["Katarzyna has 530 cats."]) == ["Katarzyna tiene 530 gatos."]
    # Training pairs: a slot only where the target holds the entity; evaluation: every entity of the source.
    pairs = [(f"Mary has 3 cats{'!' * n}", f"Mary tiene tres gatos{'!' * n}") for n in range(8)]
    slotted = next((s, t) for s, t in pairs if tokenizer.slots.pair_slots(s, t))  # not in the unslotted share
    src, tgt = tokenizer.encode_pairs([slotted[0]], [slotted[1]], training=True)
    name_slot = tokenizer.src_tokens(src[0])[1]
    assert name_slot in SLOT_TOKENS and not any(t.startswith("<num") for t in tokenizer.src_tokens(src[0]))
    assert tokenizer.src_tokens(tgt[0])[1] == name_slot
    src, _ = tokenizer.encode_pairs(["Mary has 3 cats."], ["Mary tiene tres gatos."], training=False)
    assert "<num1>" in tokenizer.src_tokens(src[0])

    saved = tokenizer.save(tmp_path / "run")
    assert [f.name for f in saved] == ["tokenizer.json", FILE, "truecase.json"]
    loaded = TranslationTokenizer.load(tmp_path / "run")
    assert loaded.slots.copied == tokenizer.slots.copied
    assert loaded.encode_src(["Katarzyna has 530 cats."]) == [ids]


def test_a_tokenizer_trained_without_slots_reads_names_as_text(tmp_path):
    plain = TranslationTokenizer.train(PAIRS, vocab_size=300)
    plain.save(tmp_path)  # a run folder of before: no copy_slots.json
    loaded = TranslationTokenizer.load(tmp_path)
    assert loaded.slots is None and not (tmp_path / FILE).exists()
    tokens = loaded.src_tokens(loaded.encode_src(["Katarzyna has 530 cats."])[0])
    assert not set(tokens) & set(SLOT_TOKENS) and "".join(tokens).startswith("▁Katarzyna")
    assert loaded.decode_tgt(loaded.encode_tgt(["Tom tiene 530 gatos."]), ["Tom has 530 cats."]) == \
        ["Tom tiene 530 gatos."]


def test_evaluation_reads_sources_as_translation_does_and_training_holds_slots(full_datamodule):
    dm, tokenizer = full_datamodule, full_datamodule.tokenizer
    for split in ("validation", "test"):  # every name and number a slot, whatever the references say
        src_ids = dm.splits[split].select(range(300))["src_ids"]
        assert src_ids == tokenizer.encode_src(dm.sources(split)[:300])
    slot_ids = {tokenizer.src.token_to_id(token) for token in SLOT_TOKENS}
    train = dm.splits["train"].select(range(5000))
    with_slot = [i for i, ids in enumerate(train["tgt_ids"]) if slot_ids & set(ids)]
    assert len(with_slot) > 500  # Tom, Mary, Boston, years ...: the model learns to copy slots
    assert all(slot_ids & set(train["tgt_ids"][i]) <= set(train["src_ids"][i]) for i in with_slot)


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
    assert set(slots.pair_slots("Tomは東京に住んでいます。", "Tom lives in Tokyo.")) <= {"Tom"}
    held = slots.entities("Tomは東京に住んでいます。")
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


# Capitalized words as the corpus holds them: names copied, words translated, words in lower case.
WORDS = PAIRS + [("I like the rose.", "Me gusta la rosa."), ("I live in London.", "Vivo en Londres."),
                 ("We met on Monday.", "Nos vimos el lunes."), ("Will you come?", "¿Vendrás?"),
                 ("It will rain.", "Lloverá."), ("Tell Tom I called.", "Dile a Tom que llamé.")] * 5 + [
                 ("I met Ramón.", "Conocí a Ramón.")]  # once: known, not "copied more often than not"


@pytest.fixture(scope="module")
def word_slots() -> CopySlots:
    return CopySlots.learn(WORDS)


def test_a_capitalized_word_inside_a_sentence_is_a_name_unless_the_corpus_translates_it_there(word_slots):
    assert word_slots.entities("Tell Rose I called.") == {"Rose": "<name1>"}  # "rose" is a word, "Rose" here not
    assert word_slots.entities("I met Will and Ramón.") == {"Will": "<name1>", "Ramón": "<name2>"}
    assert word_slots.entities("I live in London, Monday, English.") == {}  # the corpus translates them there
    assert word_slots.entities("Rose is here. Will you come?") == {}  # a sentence's start says nothing
    assert word_slots.entities("I LIKE Tom.") == {"Tom": "<name1>"}  # capitals of a known word: shouting


def test_after_a_colon_or_an_opening_quote_a_capital_is_the_sentences(word_slots):
    assert word_slots.entities('I said: "Rose is here."') == {}  # "rose" is a word: its capital says nothing
    assert word_slots.entities("Rose is here: Will you come?") == {}
    assert word_slots.entities('I asked, "Where is Ramón?"') == {"Ramón": "<name1>"}  # never in the corpus


def test_joined_names_codes_and_inner_capitals_are_one_slot_each(word_slots):
    assert word_slots.entities("Marie-Claire met O'Neill in the English-Spanish class.") == {
        "Marie-Claire": "<name1>", "O'Neill": "<name2>"}  # English-Spanish: its parts are translated
    line = "I like LH2045, room 12C, a PS5, an iPad from eBay and 3 cats."
    held = word_slots.entities(line)
    assert held == {"LH2045": "<name1>", "12C": "<name2>", "PS5": "<name3>", "iPad": "<name4>", "eBay": "<name5>",
                    "3": "<num1>"}
    assert word_slots.restore(word_slots.mask(line, held), held) == line


def test_a_list_of_numbers_is_one_slot_and_other_numbers_get_one_each_up_to_the_limit(word_slots):
    listed = ", ".join(str(100 + n) for n in range(11))
    line = f"The rooms are {listed} and 111."
    assert word_slots.entities(line) == {listed: "<num1>", "111": "<num2>"}  # the list as it stands, then 111
    assert word_slots.restore("Las habitaciones <num1> y <num2>.", word_slots.entities(line), line) == \
        f"Las habitaciones {listed} y 111."
    apart = " ".join(f"room {100 + n}" for n in range(12))  # twelve numbers, no list
    assert list(word_slots.entities(apart).values()) == [f"<num{n}>" for n in range(1, 13)]
    many = " ".join(f"room {100 + n}" for n in range(SLOTS_PER_KIND + 4))
    masked = word_slots.mask(many, word_slots.entities(many))
    assert masked.endswith(" ".join(f"room {100 + n}" for n in range(SLOTS_PER_KIND, SLOTS_PER_KIND + 4)))
    assert f"<num{SLOTS_PER_KIND}>" in masked and len(SLOT_TOKENS) == 2 * SLOTS_PER_KIND


def test_typed_slot_syntax_round_trips_unchanged(word_slots, tmp_path):
    line = "I like <name1> and <num2> in the form, Katarzyna."
    held = word_slots.entities(line)
    assert held == {"<name1>": "<name1>", "<num2>": "<name2>", "Katarzyna": "<name3>"}
    assert "<num1>" not in word_slots.mask(line, held)  # no digit of the syntax became a number
    tokenizer = TranslationTokenizer.train(WORDS, vocab_size=300, copy_slots=True)
    spanish = tokenizer.encode_tgt(["Me gusta <name1> y <name2> en el formulario, <name3>."])
    assert tokenizer.decode_tgt(spanish, [line]) == ["Me gusta <name1> y <num2> en el formulario, Katarzyna."]


def test_a_dropped_slot_is_put_back_and_a_repeated_one_kept_once():
    source = "We have 12, 15 and 18 chairs, Ana."
    held = {"Ana": "<name1>", "12": "<num1>", "15": "<num2>", "18": "<num3>"}
    assert CopySlots.restore("Tenemos <num1> y <num3> sillas, <name1>.", held, source) == \
        "Tenemos 12, 15 y 18 sillas, Ana."  # 15 back after 12, joined as the source joins them
    assert CopySlots.restore("Tenemos <num1>, <num2> y <num2> sillas, <name1>.", held, source) == \
        "Tenemos 12, 15 y 18 sillas, Ana."  # the repeat stood for the slot missing
    assert CopySlots.restore("Tenemos <num1>, <num2> y <num3> <num3> sillas, <name1>.", held, source) == \
        "Tenemos 12, 15 y 18 sillas, Ana."  # a repeat with nothing missing goes, and the space before it
    # Words the model garbled around a repeat stay its words ("y <num3>,"): what restore owes is each of the
    # source's names and numbers as often as the source holds it, in its order, and no slot token left.
    restored = CopySlots.restore("Tenemos <num1>, <num2>, <num3> y <num3>, <name1>.", held, source)
    assert [w.strip(",.") for w in restored.split() if w.strip(",.") in held] == ["12", "15", "18", "Ana"]
    assert "<" not in restored and restored.startswith("Tenemos 12, 15, 18 ") and restored.endswith(", Ana.")
    # A name the model left out, with nothing before it in the source, comes back once before the full stop:
    # not lost, the model's own words kept as they came.
    restored = CopySlots.restore("Tenemos sillas.", {"Ana": "<name1>"}, "Ana has chairs.")
    assert restored.count("Ana") == 1 and restored.startswith("Tenemos sillas") and restored.endswith("Ana.")
    assert CopySlots.restore("<name1> y <name1>", {"Tom": "<name1>"}, "Tom and Tom") == "Tom y Tom"  # as often
    assert CopySlots.restore("Hola <name2>.", {"Ana": "<name1>"}) == "Hola."  # no source: only unknown slots go


def test_slots_saved_before_these_rules_keep_the_old_ones(word_slots, tmp_path):
    word_slots.save(tmp_path)
    saved = json.loads((tmp_path / FILE).read_text())
    assert CopySlots.load(tmp_path).translated_inside == word_slots.translated_inside and saved["slots_per_kind"] == 16
    del saved["translated_inside"], saved["slots_per_kind"]
    (tmp_path / FILE).write_text(json.dumps(saved))
    before = CopySlots.load(tmp_path)  # its tokenizer has six slots of each kind and read "Rose" as a word
    assert before.per_kind == 6 and before.entities("Tell Rose I called.") == {}
    assert len(before.entities(" ".join(f"room {n}" for n in range(10, 30)))) == 6
    before.save(tmp_path)  # saved again (a resumed run): still the slots of before
    assert CopySlots.load(tmp_path).per_kind == 6 and CopySlots.load(tmp_path).translated_inside is None
