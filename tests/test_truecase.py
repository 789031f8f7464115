"""data/truecase.py and the tokenizer's reading: one spelling per word, alone or inside a sentence."""

from tokenizers import decoders

from data.tokenizer import TranslationTokenizer, reads_spaced, tokenizer_fingerprint
from data.truecase import Truecaser

PAIRS = [("The kitchen is clean.", "La cocina está limpia."),
         ("It's ten o'clock, well-known.", "Son las diez."), ("Tom is in the kitchen.", "Tom está en la cocina."),
         ("I saw Tom there.", "Vi a Tom allí."), ("It is important.", "Es importante."),
         ("Where is the station?", "¿Dónde está la estación?"), ("Tell me where it is.", "Dime dónde está."),
         ("We went to the USA.", "Fuimos a los USA."), ("Kitchen. Where?", "Cocina. ¿Dónde?")] * 4


def test_the_first_word_is_read_as_the_split_writes_it_inside_sentences():
    truecaser = Truecaser.learn(PAIRS)
    assert truecaser.truecased("Kitchen") == "kitchen"
    assert truecaser.truecased("Important") == "important"
    assert truecaser.truecased("Where is the station?") == "where is the station?"
    assert truecaser.truecased("\"Where is it?\"") == "\"where is it?\""  # after an opening quote
    assert truecaser.truecased("Tom is here.") == "Tom is here."  # a name, capitalized inside sentences
    assert truecaser.truecased("I am here.") == "I am here."
    assert truecaser.truecased("USA") == "USA" and truecaser.truecased("KITCHEN") == "KITCHEN"  # capitals stay
    assert truecaser.truecased("Zorblax is here.") == "Zorblax is here."  # never seen inside: as typed
    assert truecaser.truecased("3 kitchens") == "3 kitchens"
    assert truecaser.truecased("O'Neill is here.") == "O'Neill is here."  # "o" of "o'clock" is a word, O'Neill a name
    assert truecaser.truecased("It's clean.") == "it's clean." and truecaser.truecased("Well-known") == "well-known"
    assert truecaser.truecased("¿Dónde está?", "tgt") == "¿dónde está?"
    assert truecaser.truecased("Dónde", "src") == "Dónde"  # each side its own table
    # "Where" after a sentence's end is a first word too: not counted as written inside
    assert "where" in truecaser.lower["src"] and "kitchen" in truecaser.lower["src"]


def test_a_translation_gets_back_the_capital_its_source_began_with():
    assert Truecaser.recapitalized("cocina", "Kitchen") == "Cocina"
    assert Truecaser.recapitalized("¿dónde está?", "Where is it?") == "¿Dónde está?"
    assert Truecaser.recapitalized("cocina", "kitchen") == "cocina"  # typed in lower case: left so
    assert Truecaser.recapitalized("Tom está aquí.", "Tom is here.") == "Tom está aquí."
    assert Truecaser.recapitalized("", "Kitchen") == "" and Truecaser.recapitalized("530", "Kitchen") == "530"
    assert Truecaser.recapitalized("tres gatos están aquí.", "3 cats are here.") == "Tres gatos están aquí."
    assert Truecaser.recapitalized("where is the kitchen?", "厨房在哪里？") == "Where is the kitchen?"  # no case
    assert Truecaser.recapitalized("20 personas vinieron.", "Twenty people came.") == "20 personas vinieron."
    assert Truecaser.recapitalized("iPhone es nuevo.", "The iPhone is new.") == "iPhone es nuevo."


def test_a_word_has_the_same_pieces_alone_as_inside_a_sentence(tmp_path):
    tokenizer = TranslationTokenizer.train(PAIRS, vocab_size=400, copy_slots=True)
    assert tokenizer.spaced and tokenizer.truecaser is not None
    alone = tokenizer.encode_src(["Kitchen"])[0][:-1]
    inside = tokenizer.encode_src(["The kitchen is clean."])[0][:-1]
    assert tokenizer.src_tokens(alone) == tokenizer.src_tokens(inside[1:2]) == ["▁kitchen"]
    assert tokenizer.src_tokens(inside[:1]) == ["▁the"]
    for text in ["¿Dónde está la cocina?", "  two spaces", "Tom tiene 530 gatos!", ""]:  # no leading space written
        assert tokenizer.decode_tgt(tokenizer.encode_tgt([text])) == [text]
    ids = tokenizer.encode_tgt(["¿dónde está la cocina?"])  # the model's output: given the source's capital
    assert tokenizer.decode_tgt(ids, ["Where is the kitchen?"]) == ["¿Dónde está la cocina?"]
    assert tokenizer.decode_tgt(ids, ["where is the kitchen?"]) == ["¿dónde está la cocina?"]
    sources, _ = tokenizer.encode_pairs(["Kitchen"], ["Cocina"], training=True)
    assert sources[0][:-1] == alone  # training reads as translation does
    tokenizer.save(tmp_path)
    loaded = TranslationTokenizer.load(tmp_path)
    assert loaded.spaced and loaded.truecaser.lower == tokenizer.truecaser.lower
    before = tokenizer_fingerprint(tmp_path)
    (tmp_path / "truecase.json").write_text('{"src": [], "tgt": []}')
    assert tokenizer_fingerprint(tmp_path) != before  # the table is part of what a checkpoint is checked against


def test_a_tokenizer_trained_before_reads_lines_as_they_are():
    new = TranslationTokenizer.train(PAIRS, vocab_size=300, copy_slots=False)
    new.src.decoder = decoders.ByteLevel()  # as tokenizer.json was written before: no Strip, no truecase.json
    before = TranslationTokenizer(new.src)
    assert not reads_spaced(before.src) and before.truecaser is None
    assert before.src.encode("Kitchen").ids + [before.eos_id] == before.encode_src(["Kitchen"])[0]
    assert before.decode_tgt(before.encode_tgt(["Cocina"]), ["kitchen"]) == ["Cocina"]
