"""model/search.py: greedy and beam search with the cache."""

import pytest
import torch

from model.search import (
    SearchConfig,
    beam_search,
    greedy_decode,
    length_penalty_factor,
    max_output_length,
    search,
    sequence_log_prob,
    strip_special,
)
from model.transformer import Seq2SeqTransformer

PAD, BOS, EOS = 0, 1, 2


def random_model(output_rows: int | slice, factor: float) -> Seq2SeqTransformer:
    """A seeded random model with some rows of its (tied) output layer scaled by ``factor``."""
    torch.manual_seed(3)
    m = Seq2SeqTransformer(30, 30, d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=64,
                           dropout=0.0, max_len=64).eval()
    with torch.no_grad():
        m.output.weight[output_rows] *= factor
    return m


@pytest.fixture(scope="module")
def model():
    """Sharpened output layer: confident, distinct predictions (it rarely ends a sentence)."""
    return random_model(slice(None), 6.0)


@pytest.fixture(scope="module")
def ending_model():
    """The EOS logit boosted, so that sentences end, at different steps."""
    return random_model(EOS, 3.5)


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


@pytest.mark.parametrize("beam_size", [1, 4])
def test_search_is_greedy_or_beam_with_eos_cut_off(ending_model, sources, beam_size):
    model = ending_model
    config = SearchConfig(beam_size=beam_size, length_penalty=0.6, max_len_a=1.5, max_len_b=10)
    if beam_size == 1:
        tokens = greedy_decode(model, sources, BOS, EOS, 1.5, 10)
    else:
        tokens, _ = beam_search(model, sources, BOS, EOS, beam_size, 0.6, 1.5, 10)
    output = search(model, sources, BOS, EOS, config)
    assert output.ids == strip_special(tokens, EOS, PAD) and output.attention == {}
    assert any(EOS in row for row in tokens.tolist())  # some sentences did end: the cut was exercised


def test_search_attention_is_that_of_the_chosen_hypothesis(ending_model, sources):
    model = ending_model
    output = search(model, sources, BOS, EOS, SearchConfig(beam_size=4), attention_rows=[0, 5])
    tokens, _ = beam_search(model, sources, BOS, EOS, beam_size=4)
    assert EOS in tokens[0].tolist() and EOS in tokens[5].tolist()  # both ended: EOS is among their queries
    for row in (0, 5):
        sentence = output.attention[row]
        produced = [t for t in tokens[row].tolist() if t != PAD]  # the beam's winner, with its EOS if any
        assert sentence.output_ids == produced and sentence.input_ids == [BOS] + produced[:-1]
        assert sentence.src_ids == [t for t in sources[row].tolist() if t != PAD]
        src, tgt_in = torch.tensor([sentence.src_ids]), torch.tensor([sentence.input_ids])
        full = model.attention_maps(src, tgt_in)
        torch.testing.assert_close(sentence.maps.cross[-1], full.cross[-1][0])
    # Greedy: teacher forcing on the recorded inputs predicts exactly the recorded outputs.
    sentence = search(model, sources, BOS, EOS, SearchConfig(beam_size=1), attention_rows=[2]).attention[2]
    logits = model(torch.tensor([sentence.src_ids]), torch.tensor([sentence.input_ids]))
    assert logits.argmax(-1)[0].tolist() == sentence.output_ids


def test_search_config_is_checked():
    with pytest.raises(ValueError, match="beam_size must be at least 1"):
        SearchConfig(beam_size=0)
    with pytest.raises(ValueError, match="max_len_a"):
        SearchConfig(max_len_a=-1.0)
    assert SearchConfig(beam_size=5, max_len_b=7).greedy == SearchConfig(beam_size=1, max_len_b=7)
