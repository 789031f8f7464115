"""model/views/alignment.py: the AER's arithmetic, attention summed into words, the diagonal."""

import pytest
import torch

from model.views.alignment import Overlap, diagonal_alignment, links, word_alignment, word_weights


def test_aer_of_a_hand_made_case():
    gold = {(0, 0), (1, 1), (2, 1), (3, 2)}
    predicted = {(0, 0), (1, 1), (3, 1)}  # two right, one wrong, two missed
    overlap = Overlap.of(predicted, gold)
    assert overlap == Overlap(shared=2, predicted=3, gold=4)
    assert overlap.aer == pytest.approx(100 * (1 - 4 / 7))
    assert Overlap.of(gold, gold).aer == 0 and Overlap.of({(5, 5)}, gold).aer == 100


def test_the_aer_of_a_set_sums_its_links_before_dividing():
    short = Overlap.of({(0, 0)}, {(0, 0)})  # right, one link
    long = Overlap.of({(i, i + 1) for i in range(9)}, {(i, i) for i in range(9)})  # wrong, nine links
    assert (short + long).aer == pytest.approx(100 * (1 - 2 / 20))  # not the mean of 0 and 100
    assert sum([short, long], Overlap()) == Overlap(1, 10, 10)


def test_pieces_are_summed_into_words_and_the_end_of_sentence_is_left_out():
    # 3 target pieces (words 0, 0, 1) over 4 source pieces (words 0, 1, 1, EOS)
    weights = torch.tensor([[0.1, 0.2, 0.1, 0.6],
                            [0.3, 0.1, 0.1, 0.5],
                            [0.5, 0.2, 0.2, 0.1]], dtype=torch.float64)
    by_word = word_weights(weights, [0, 1, 1, None], [0, 0, 1])
    expected = torch.tensor([[0.1 + 0.3, 0.2 + 0.1 + 0.1 + 0.1], [0.5, 0.2 + 0.2]], dtype=torch.float64)
    torch.testing.assert_close(by_word.double(), expected)
    assert links(by_word) == {(1, 0), (0, 1)}  # EOS had the most weight of every row: it never wins
    assert word_alignment(weights, [0, 1, 1, None], [0, 0, 1]) == {(1, 0), (0, 1)}


def test_leading_axes_are_kept_by_word_weights_and_summed_by_word_alignment():
    weights = torch.rand(2, 3, 4, 5)  # (layers, heads, tgt_pieces, src_pieces)
    src_words, tgt_words = [0, 0, 1, 2, None], [0, 1, 1, 2]
    by_word = word_weights(weights, src_words, tgt_words)
    assert by_word.shape == (2, 3, 3, 3)
    torch.testing.assert_close(by_word[1, 2], word_weights(weights[1, 2], src_words, tgt_words))
    assert word_alignment(weights, src_words, tgt_words) == links(by_word.sum((0, 1)))


def test_the_diagonal_spreads_target_words_over_the_source():
    assert diagonal_alignment(4, 4) == {(0, 0), (1, 1), (2, 2), (3, 3)}
    assert diagonal_alignment(2, 4) == {(0, 0), (0, 1), (1, 2), (1, 3)}  # round(j / 2): halves to even
    assert diagonal_alignment(3, 2) == {(0, 0), (2, 1)}
