"""model/inference/word_alignment.py: pieces to words (BPE pieces, copy slots), the head read, a line's own words
(a list marker, a label, cells), Pharaoh's format."""

import torch

from data.sentences import LineSplitter, translated_at
from helpers import tiny_model, tokenizer_with_slots
from model.inference.word_alignment import line_alignment, pharaoh, piece_words, sentence_links
from model.transformer import AttentionMaps


def test_each_piece_belongs_to_the_word_it_spells_and_a_name_is_one_slot():
    tokenizer = tokenizer_with_slots()
    ids = tokenizer.encode_src(["Oluwaseun sees the unbelievably distant house."])[0]
    words = piece_words(tokenizer.src, ids[:-1])
    assert ids[1] == tokenizer.src.token_to_id("<name1>") and words[:2] == [0, 0]  # the name, read as its slot
    assert len(ids) - 1 > 6 and words == sorted(words)  # more pieces than words, in order
    spelled = [tokenizer.src.decode([i for i, word in zip(ids, words) if word == n]).strip() for n in range(6)]
    assert spelled == ["<name1>", "sees", "the", "unbelievably", "distant", "house."]
    assert piece_words(tokenizer.src, ids) == words + [5]  # EOS decodes to nothing: the word before it


class PointingModel(torch.nn.Module):
    """Cross-attention made by hand: layer 1's head 0 looks, in the row predicting target piece i, at source piece
    ``points[i]``; every other head at the first source piece."""

    pad_id = 0

    def __init__(self, points: list[int]) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.points = points

    def attention_maps(self, src, tgt_in) -> AttentionMaps:
        layers = torch.zeros(2, src.size(0), 3, tgt_in.size(1), src.size(1))
        layers[..., 0] = 1.0
        for row, column in enumerate(self.points):
            layers[1, :, 0, row] = torch.nn.functional.one_hot(torch.tensor(column), src.size(1)).float()
        return AttentionMaps(cross=list(layers))


def test_the_aligned_head_is_read_where_the_run_has_one_else_every_head_averaged():
    tokenizer = tokenizer_with_slots()
    src = tokenizer.encode_src(["the dog sees the house."])[0]
    out = tokenizer.encode_tgt(["la casa ve la perra."])[0] + [tokenizer.eos_id]
    src_words, tgt_words = piece_words(tokenizer.src, src[:-1]), piece_words(tokenizer.tgt, out[:-1])
    # Each target word's first piece points at the first piece of source word 4 - its index (reversed).
    points = [src_words.index(min(4, 4 - word)) for word in tgt_words]
    model = PointingModel(points)
    aligned = sentence_links(model, tokenizer.src, tokenizer.tgt, [(src, out)], tokenizer.bos_id, tokenizer.eos_id,
                             aligned=(1, 0))[0]
    assert aligned == {(4 - t, t) for t in range(5)}
    averaged = sentence_links(model, tokenizer.src, tokenizer.tgt, [(src, out)], tokenizer.bos_id, tokenizer.eos_id)[0]
    assert averaged == {(0, t) for t in range(5)}  # five of six heads look at word 0


def test_a_batch_reads_the_same_links_as_each_sentence_alone():
    tokenizer = tokenizer_with_slots()
    model = tiny_model(tokenizer.src_vocab_size, num_decoder_layers=2).eval()
    pairs = [(tokenizer.encode_src([s])[0], tokenizer.encode_tgt([t])[0] + [tokenizer.eos_id])
             for s, t in [("Tom sees the house.", "Tom ve la casa."), ("the dog.", "la perra en la estación.")]]
    special = tokenizer.bos_id, tokenizer.eos_id
    batched = sentence_links(model, tokenizer.src, tokenizer.tgt, pairs, *special)
    alone = [sentence_links(model, tokenizer.src, tokenizer.tgt, [pair], *special)[0] for pair in pairs]
    assert batched == alone and [len(found) for found in batched] == [4, 5]  # each target word linked once


def test_a_line_is_aligned_in_its_own_words_past_markers_labels_and_cells():
    splitter = LineSplitter("en", "es")
    line = "2. Note: Keep your ticket.\t\"Thanks!\""
    pieces = splitter.pieces(line)
    assert [piece.text for piece in pieces if piece.translated] == ["Note", "Keep your ticket.", "Thanks!"]
    text, placed = splitter.placed(pieces, ["Nota", "Guarde su billete.", "¡Gracias!"])
    assert text == "2. Nota: Guarde su billete.\t\"¡Gracias!\"" and [at for at, _ in placed] == [3, 9, 29]
    found = [{(0, 0)}, {(0, 0), (1, 1), (2, 2)}, {(0, 0)}]
    # Line words: 2. | Note: | Keep | your | ticket. | "Thanks!"  and  2. | Nota: | Guarde | su | billete. | "¡Gracias!"
    assert line_alignment((line, translated_at(pieces)), (text, placed), found) == \
        [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]
    repaired = [{(0, 0)}, {(0, 0), (2, 3)}, {(0, 0)}]  # a word the translation's repair dropped: its last word
    assert (4, 4) in line_alignment((line, translated_at(pieces)), (text, placed), repaired)
    assert pharaoh([(0, 0), (2, 1), (1, 2)]) == "0-0 2-1 1-2" and pharaoh([]) == ""
