"""model/scoring/alignment_report.py: gold words to BPE pieces and copy slots, the rows read, the AER of every
layer and head of a model, and a pair without a gold set."""

import torch

from data.gold_alignments import GoldPair, written
from data.languages import LanguagePair
from helpers import tiny_model, tokenizer_with_slots
from model.scoring.alignment_report import alignment_report, alignment_scores, cross_attention, pieces_and_words
from model.transformer import AttentionMaps


def test_every_bpe_piece_belongs_to_the_word_it_spells():
    tokenizer = tokenizer_with_slots()
    words = ["Where", "is", "the", "unbelievably", "distant", "station", "?"]
    ids, owners = pieces_and_words(tokenizer, words)
    assert len(ids) > len(words) and owners == sorted(owners) and set(owners) == set(range(len(words)))
    for index, word in enumerate(words):  # the pieces of each word spell it (with the space before it)
        spelled = tokenizer.src.decode([i for i, owner in zip(ids, owners) if owner == index])
        assert spelled.strip() == word
    words = ["The", "unbelievably", "distant", "house", "sees", "the", "station", "."]  # no name: no slot
    ids, owners = pieces_and_words(tokenizer, words)
    assert ids == tokenizer.encode_src([written(words)[0]])[0][:-1]  # read as a line to translate is: " the ..."
    assert owners == sorted(owners) and set(owners) == set(range(len(words)))


def test_a_name_the_target_holds_is_read_as_its_copy_slot():
    tokenizer = tokenizer_with_slots()
    model = tiny_model(tokenizer.src_vocab_size)
    pair = GoldPair(["Oluwaseun", "sees", "the", "house", "."], ["Oluwaseun", "ve", "la", "casa", "."],
                    frozenset({(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)}))
    cross, src_owner, tgt_owner = cross_attention(model, tokenizer, pair)
    slot = tokenizer.src.token_to_id("<name1>")
    src_ids, _ = pieces_and_words(tokenizer, ["<name1>", "sees", "the", "house", "."])
    assert slot in src_ids and src_owner[src_ids.index(slot)] == 0 and src_owner[-1] is None  # EOS: no word
    assert cross.shape == (2, 4, len(tgt_owner), len(src_owner))  # (layers, heads, tgt_pieces, src_pieces)


class PointingModel(torch.nn.Module):
    """A model whose cross-attention is made by hand: head 0 of layer 1, in the row that predicts each target
    piece, looks at the source piece of the same word (a word-for-word gold); every other head at EOS."""

    max_len = 64

    def __init__(self, src_owner: list, tgt_owner: list) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.src_owner, self.tgt_owner = src_owner, tgt_owner

    def attention_maps(self, src, tgt_in) -> AttentionMaps:
        rows, columns = tgt_in.size(1), src.size(1)
        layers = torch.zeros(2, 1, 3, rows, columns)
        layers[..., -1] = 1.0  # every head looks at EOS ...
        for row, word in enumerate(self.tgt_owner):  # ... but this one: row i predicts target piece i
            layers[1, 0, 0, row] = torch.tensor([float(owner == word) for owner in self.src_owner] + [0.0])
        layers[1, 0, 0, -1, 0] = 1.0  # the row after the last piece (it predicts EOS) points elsewhere
        return AttentionMaps(cross=list(layers))


def test_the_row_that_predicts_each_piece_is_read_and_every_head_is_scored():
    tokenizer = tokenizer_with_slots()
    words = ["unbelievably", "distant", "station", "house", "?"]
    pair = GoldPair(words, words, frozenset((i, i) for i in range(len(words))))
    src_ids, src_owner = pieces_and_words(tokenizer, words)
    _, tgt_owner = pieces_and_words(tokenizer, words, "tgt")
    scores = alignment_scores(PointingModel(src_owner, tgt_owner), tokenizer, [pair] * 3)
    assert scores["pairs"] == 3 and scores["best_head"] == {"layer": 2, "head": 1, "aer": 0.0}
    # At EOS (left out), every word falls to the first source word: 1 of 5 links right, AER 1 - 2·1/10.
    assert scores["by_head"][0] == [80.0, 80.0, 80.0] and scores["by_head"][1][1:] == [80.0, 80.0]
    assert scores["by_layer"] == [80.0, 0.0]
    assert scores["diagonal"] == 0.0 and scores["averaged"] == 0.0


def test_a_model_is_scored_on_every_shipped_set_and_another_pair_is_told_it_has_none():
    tokenizer = tokenizer_with_slots()
    model = tiny_model(tokenizer.src_vocab_size, max_len=256).train()
    report = alignment_report(model, tokenizer, LanguagePair("en", "es"))
    assert model.training  # given back as it came
    assert "not why" in report["what"]
    for name in ("everyday", "europarl"):
        found = report[name]
        assert found["pairs"] == 100 and 0 <= found["averaged"] <= 100
        assert len(found["by_head"]) == 2 and len(found["by_head"][0]) == 4 and len(found["by_layer"]) == 2
    assert report["europarl"]["diagonal"] == 59.2  # the anchor in data/alignment/README.md
    note = alignment_report(model, tokenizer, LanguagePair("en", "nl"))
    assert list(note) == ["note"] and "English→Dutch" in note["note"]
