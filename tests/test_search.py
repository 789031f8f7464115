"""model/search.py: greedy and beam search with the cache, and the attention of a searched sentence."""

import pytest
import torch

from helpers import BOS, EOS, PAD, sequence_log_prob, tiny_model
from model.search import (
    MAX_ALTERNATIVES,
    SearchConfig,
    beam_hypotheses,
    beam_search,
    greedy_decode,
    length_penalty_factor,
    output_limits,
    search,
    sentence_attention,
)
from model.search_outputs import produced_ids
from model.transformer import Seq2SeqTransformer


def ids_of(outputs) -> list[list[int]]:
    return [output.ids for output in outputs]


def random_model(output_rows: int | slice, factor: float) -> Seq2SeqTransformer:
    """A seeded random model with some rows of its (tied) output layer scaled by ``factor``."""
    m = tiny_model(30, seed=3)
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
    cached, uncached = greedy_decode(model, sources, BOS, EOS), greedy_decode(model, sources, BOS, EOS, use_cache=False)
    assert torch.equal(cached.tokens, uncached.tokens)
    torch.testing.assert_close(cached.log_probs, uncached.log_probs)


def test_beam_size_one_is_exactly_greedy(model, sources):
    greedy = greedy_decode(model, sources, BOS, EOS)
    beam = beam_search(model, sources, BOS, EOS, SearchConfig(beam_size=1))
    assert torch.equal(beam.tokens, greedy.tokens)
    torch.testing.assert_close(beam.scores, greedy.scores)
    torch.testing.assert_close(beam.log_probs, greedy.log_probs)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_larger_beams_never_score_below_greedy(model, sources, alpha):
    greedy = greedy_decode(model, sources, BOS, EOS).tokens

    def normalized(tokens):
        lengths = (tokens != PAD).sum(1).float()  # EOS counts, padding does not
        return sequence_log_prob(model, sources, tokens, BOS) / length_penalty_factor(lengths, alpha)

    greedy_score = normalized(greedy)
    for k in (2, 4, 8):
        beam, beam_score, *_ = beam_search(model, sources, BOS, EOS, SearchConfig(beam_size=k, length_penalty=alpha))
        # The score beam search reports is the model's own length-normalized log-probability.
        torch.testing.assert_close(beam_score, normalized(beam), atol=1e-4, rtol=1e-4)
        assert torch.all(beam_score >= greedy_score - 1e-5), (k, beam_score - greedy_score)


def test_outputs_end_at_eos_and_respect_each_sentences_length_limit(model, sources):
    config = SearchConfig(max_len_a=1.0, max_len_b=2)
    limits = output_limits(sources, PAD, config, model.max_len)
    assert limits.tolist() == [(row != PAD).sum().item() + 2 for row in sources]  # a · its length + b
    for out in (greedy_decode(model, sources, BOS, EOS, config).tokens, beam_search(model, sources, BOS, EOS, config).tokens):
        for row, limit in zip(out.tolist(), limits.tolist()):
            assert len([t for t in row if t != PAD]) <= limit
            if EOS in row:  # nothing but padding after the first EOS
                assert all(t == PAD for t in row[row.index(EOS) + 1 :])
    assert output_limits(torch.ones(1, 500, dtype=torch.long), PAD, SearchConfig(), 64).tolist() == [63]


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_translation_does_not_depend_on_its_batch(model, sources, beam_size):
    config = SearchConfig(beam_size=beam_size, max_len_a=1.0, max_len_b=2)
    together = search(model, sources, BOS, EOS, config)
    alone = [search(model, sources[i : i + 1, : (sources[i] != PAD).sum()], BOS, EOS, config)[0] for i in range(12)]
    assert ids_of(together) == ids_of(alone)
    torch.testing.assert_close([o.log_prob for o in together], [o.log_prob for o in alone])


def test_produced_ids_end_with_the_eos_the_search_reached():
    assert produced_ids(torch.tensor([[5, 6, EOS, PAD], [7, PAD, PAD, PAD]]), EOS, PAD) == [[5, 6, EOS], [7]]


@pytest.mark.parametrize("beam_size", [1, 4])
def test_search_is_greedy_or_beam_up_to_the_eos(ending_model, sources, beam_size):
    model = ending_model
    config = SearchConfig(beam_size=beam_size, length_penalty=0.6, max_len_a=1.5, max_len_b=10)
    found = (greedy_decode if beam_size == 1 else beam_search)(model, sources, BOS, EOS, config)
    tokens = found.tokens
    assert ids_of(search(model, sources, BOS, EOS, config)) == produced_ids(tokens, EOS, PAD)
    assert any(EOS in row for row in tokens.tolist())  # some sentences did end: the cut was exercised


def test_sentence_attention_is_that_of_the_chosen_hypothesis(ending_model, sources):
    model = ending_model
    outputs = ids_of(search(model, sources, BOS, EOS, SearchConfig(beam_size=4)))
    tokens = beam_search(model, sources, BOS, EOS, SearchConfig(beam_size=4)).tokens
    assert EOS in tokens[0].tolist() and EOS in tokens[5].tolist()  # both ended: EOS is among their queries
    for row in (0, 5):
        src_ids = [t for t in sources[row].tolist() if t != PAD]
        sentence = sentence_attention(model, src_ids, outputs[row], BOS)
        produced = [t for t in tokens[row].tolist() if t != PAD]  # the beam's winner, with its EOS
        assert sentence.output_ids == produced and sentence.input_ids == [BOS] + produced[:-1]
        assert sentence.src_ids == src_ids
        full = model.attention_maps(torch.tensor([src_ids]), torch.tensor([sentence.input_ids]))
        torch.testing.assert_close(sentence.maps.cross[-1], full.cross[-1][0])
        assert sentence.maps.cross[0].shape[1:] == (len(produced), len(src_ids))
    # Greedy: teacher forcing on the recorded inputs predicts exactly the recorded outputs.
    output_ids = search(model, sources[2:3], BOS, EOS, SearchConfig(beam_size=1))[0].ids
    sentence = sentence_attention(model, [t for t in sources[2].tolist() if t != PAD], output_ids, BOS)
    logits = model(torch.tensor([sentence.src_ids]), torch.tensor([sentence.input_ids]))
    assert logits.argmax(-1)[0].tolist() == sentence.output_ids


def test_search_config_is_checked():
    for beam_size in (0, 65, 100_000):  # 64 at most: memory grows with it, quality does not
        with pytest.raises(ValueError, match="beam_size must be between 1 \\(greedy\\) and 64"):
            SearchConfig(beam_size=beam_size)
    with pytest.raises(ValueError, match="max_len_a"):
        SearchConfig(max_len_a=-1.0)
    assert SearchConfig(beam_size=5, max_len_b=7).greedy == SearchConfig(beam_size=1, max_len_b=7)


def test_a_large_batch_is_searched_in_bounded_parts(ending_model, sources, monkeypatch):
    import model.search as search_module

    config = SearchConfig(beam_size=4)
    parts = [search(ending_model, sources[i : i + 3], BOS, EOS, config) for i in range(0, 12, 3)]
    monkeypatch.setattr(search_module, "MAX_SEARCH_ROWS", 12)  # 3 sentences x beam 4 at a time
    calls = []
    real_beam_hypotheses = search_module.beam_hypotheses
    monkeypatch.setattr(search_module, "beam_hypotheses",
                        lambda m, src, *a: calls.append(len(src)) or real_beam_hypotheses(m, src, *a))
    assert ids_of(search(ending_model, sources, BOS, EOS, config)) == [ids for part in parts for ids in ids_of(part)]
    assert calls == [3, 3, 3, 3]  # never more than 12 hypotheses at once


def test_the_beams_hypotheses_come_best_first_with_their_own_scores(model, sources):
    config = SearchConfig(beam_size=4, length_penalty=0.6)
    hypotheses, scores, *_ = beam_hypotheses(model, sources, BOS, EOS, config)
    best, best_score, *_ = beam_search(model, sources, BOS, EOS, config)
    assert hypotheses.shape[:2] == (12, 4) and torch.equal(hypotheses[:, 0], best) and torch.equal(scores[:, 0], best_score)
    assert torch.all(scores[:, :-1] >= scores[:, 1:])  # best first
    for j in range(4):  # each score is the model's own length-normalized log-probability of that hypothesis
        lengths = (hypotheses[:, j] != PAD).sum(1).float()
        own = sequence_log_prob(model, sources, hypotheses[:, j], BOS) / length_penalty_factor(lengths, 0.6)
        torch.testing.assert_close(scores[:, j], own, atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def varied_sources():
    """40 sources of 1 to 20 tokens: sentences end at many different steps."""
    torch.manual_seed(5)
    lengths = torch.randint(1, 21, (40,))
    src = torch.full((40, 21), PAD)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(3, 30, (n,))
        src[i, n] = EOS
    return src


@pytest.mark.parametrize("beam_size,alpha", [(1, 0.6), (2, 0.0), (5, 0.6), (8, 1.0)])
def test_the_same_hypotheses_as_the_plain_beam_search(ending_model, varied_sources, beam_size, alpha):
    # The plain algorithm (tests/frozen_search.py: source repeated k times, every cache re-gathered, the batch
    # run to its last sentence) against ours: the same hypotheses in the same order, token for token.
    from frozen_search import plain_beam_hypotheses

    config = SearchConfig(beam_size=beam_size, length_penalty=alpha)
    tokens, scores, *_ = beam_hypotheses(ending_model, varied_sources, BOS, EOS, config)
    plain_tokens, plain_scores = plain_beam_hypotheses(ending_model, varied_sources, BOS, EOS, config)
    ids = [produced_ids(sentence, EOS, PAD) for sentence in tokens]
    assert ids == [produced_ids(sentence, EOS, PAD) for sentence in plain_tokens]
    torch.testing.assert_close(scores, plain_scores, rtol=1e-5, atol=1e-6)
    best = [hypotheses[0] for hypotheses in ids]
    assert len({len(output) for output in best}) > 2 and any(EOS in output for output in best)  # ended apart
    assert ids_of(search(ending_model, varied_sources, BOS, EOS, config)) == best


@pytest.mark.parametrize("beam_size", [1, 4])
def test_rows_no_longer_wanted_end_at_the_next_step_and_the_others_are_unchanged(model, sources, beam_size):
    config = SearchConfig(beam_size=beam_size, max_len_a=3.0)
    whole = ids_of(search(model, sources, BOS, EOS, config))
    asked = []

    def keep_rows() -> list[bool]:  # rows 2 and 5 are dropped after the third step
        asked.append(True)
        return [len(asked) <= 3 or row not in (2, 5) for row in range(len(sources))]

    cut = ids_of(search(model, sources, BOS, EOS, config, keep_rows))
    assert [ids for row, ids in enumerate(cut) if row not in (2, 5)] == \
        [ids for row, ids in enumerate(whole) if row not in (2, 5)]
    assert all(len(cut[row]) <= 4 < len(whole[row]) for row in (2, 5))


def test_the_beams_other_hypotheses_come_with_the_output_from_the_same_search(ending_model, varied_sources):
    config = SearchConfig(beam_size=4)
    outputs = search(ending_model, varied_sources, BOS, EOS, config)
    beams = beam_hypotheses(ending_model, varied_sources, BOS, EOS, config, best_only=True)
    for output, tokens in zip(outputs, beams.tokens):
        assert [output.ids, *output.alternatives] == produced_ids(tokens, EOS, PAD)
        assert len({tuple(ids) for ids in [output.ids, *output.alternatives]}) == 4  # four different hypotheses
    assert any(alternative[-1:] == [EOS] for output in outputs for alternative in output.alternatives)
    wide = SearchConfig(beam_size=8)  # a wider beam keeps its next best MAX_ALTERNATIVES, no more
    beams = beam_hypotheses(ending_model, varied_sources, BOS, EOS, wide, best_only=True)
    for output, tokens in zip(search(ending_model, varied_sources, BOS, EOS, wide), beams.tokens):
        assert [output.ids, *output.alternatives] == produced_ids(tokens, EOS, PAD)[: 1 + MAX_ALTERNATIVES]
    for plain in (search(ending_model, varied_sources, BOS, EOS, config, scores=False),
                  search(ending_model, varied_sources, BOS, EOS, config.greedy)):  # nothing to compare with
        assert all(output.alternatives == [] for output in plain)


@pytest.mark.parametrize("beam_size", [1, 4])
@pytest.mark.parametrize("attention", ["averaged", (1, 2)])
def test_the_search_keeps_the_cross_attention_each_id_was_chosen_with(ending_model, sources, beam_size, attention):
    config = SearchConfig(beam_size=beam_size, max_len_a=1.0, max_len_b=6)
    plain = search(ending_model, sources, BOS, EOS, config)
    found = search(ending_model, sources, BOS, EOS, config, attention=attention)
    assert ids_of(found) == ids_of(plain) and all(output.attention is None for output in plain)  # the same search
    assert len({len(output.ids) for output in found}) > 1  # sentences that end at different steps
    for src_row, output in zip(sources, found):
        src_ids = src_row[src_row != PAD].tolist()
        cross = sentence_attention(ending_model, src_ids, output.ids, BOS).maps.cross  # teacher forcing, per layer
        expected = torch.stack(cross).mean((0, 1)) if attention == "averaged" else cross[attention[0]][attention[1]]
        assert output.attention.shape == (len(output.ids), sources.size(1))
        torch.testing.assert_close(output.attention[:, : len(src_ids)], expected, atol=1e-5, rtol=1e-4)
        assert output.attention[:, len(src_ids) :].abs().sum() == 0  # no weight on padding
