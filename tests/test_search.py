"""model/search.py: greedy and beam search with the cache."""

import pytest
import torch

from model.search import (
    beam_search,
    greedy_decode,
    length_penalty_factor,
    max_output_length,
    sequence_log_prob,
    strip_special,
)
from model.transformer import Seq2SeqTransformer

PAD, BOS, EOS = 0, 1, 2


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(3)
    m = Seq2SeqTransformer(30, 30, d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=64,
                           dropout=0.0, max_len=64).eval()
    # Sharpen the output layer so that EOS is reachable and sentences end at different steps.
    with torch.no_grad():
        m.output.weight.mul_(6.0)
    return m


@pytest.fixture(scope="module")
def sources():
    torch.manual_seed(4)
    src = torch.randint(3, 30, (12, 9))
    for i in range(12):
        src[i, 3 + i % 6 :] = PAD
        src[i, 2 + i % 6] = EOS
    return src


def test_cached_greedy_equals_uncached(model, sources):
    assert torch.equal(greedy_decode(model, sources, BOS, EOS), greedy_decode(model, sources, BOS, EOS, use_cache=False))


def test_beam_size_one_is_exactly_greedy(model, sources):
    greedy = greedy_decode(model, sources, BOS, EOS)
    beam, _ = beam_search(model, sources, BOS, EOS, beam_size=1)
    assert torch.equal(beam, greedy)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_larger_beams_never_score_below_greedy(model, sources, alpha):
    greedy = greedy_decode(model, sources, BOS, EOS)

    def normalized(tokens):
        lengths = (tokens != PAD).sum(1).float()  # EOS counts, padding does not
        return sequence_log_prob(model, sources, tokens, BOS, EOS) / length_penalty_factor(lengths, alpha)

    greedy_score = normalized(greedy)
    for k in (2, 4, 8):
        beam, beam_score = beam_search(model, sources, BOS, EOS, beam_size=k, length_penalty=alpha)
        # The score beam search reports is the model's own length-normalized log-probability.
        torch.testing.assert_close(beam_score, normalized(beam), atol=1e-4, rtol=1e-4)
        assert torch.all(beam_score >= greedy_score - 1e-5), (k, beam_score - greedy_score)


def test_outputs_end_at_eos_and_respect_max_length(model, sources):
    out = greedy_decode(model, sources, BOS, EOS, max_len_a=1.0, max_len_b=2)
    assert out.size(1) <= max_output_length(sources, PAD, 1.0, 2, model.max_len)
    for row in out.tolist():
        if EOS in row:  # nothing but padding after the first EOS
            assert all(t == PAD for t in row[row.index(EOS) + 1 :])
    assert max_output_length(torch.ones(1, 500, dtype=torch.long), PAD, 1.5, 10, 64) == 63


def test_strip_special():
    assert strip_special(torch.tensor([[5, 6, EOS, PAD], [7, PAD, PAD, PAD]]), EOS, PAD) == [[5, 6], [7]]
