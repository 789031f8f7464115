"""data/ibm2.py: fast_align's model recovers a known alignment, favors the diagonal, aligns to NULL what has no
source, and the guide keeps the links both directions agree on."""

import random

from data.ibm2 import NO_SOURCE, align, guide

# A made-up language: source word w is target word w + 100; "la" (199) is inserted with no source.
LEXICON = {w: w + 100 for w in range(1, 30)}


def corpus(n: int = 400, seed: int = 0) -> tuple[list, list]:
    """Pairs whose target is the source's words translated, some adjacent ones swapped, and the true alignments."""
    draw = random.Random(seed)
    pairs, truths = [], []
    for _ in range(n):
        source = draw.sample(range(1, 30), draw.randint(3, 8))
        order = list(range(len(source)))
        if draw.random() < 0.5:  # swap a neighboring pair: adjective after noun
            k = draw.randrange(len(order) - 1)
            order[k], order[k + 1] = order[k + 1], order[k]
        target, truth = [LEXICON[source[i]] for i in order], list(order)
        if draw.random() < 0.3:  # an article with no source word
            target.insert(0, 199)
            truth.insert(0, NO_SOURCE)
        pairs.append((source, target))
        truths.append(truth)
    return pairs, truths


def test_em_recovers_the_alignment_of_a_made_up_language():
    pairs, truths = corpus()
    found = align(pairs, iterations=5)
    links = [(i, t) for f, t in zip(found, truths) for i, t in zip(f, t) if t != NO_SOURCE]
    assert sum(i == t for i, t in links) / len(links) > 0.98
    # The inserted article has no source: NULL, or at least never a source word its translation would claim.
    assert all(len(f) == len(p[1]) for f, p in zip(found, pairs))


def test_with_no_evidence_the_diagonal_decides():
    pairs = [([1, 2, 3, 4], [5, 6, 7, 8])]  # one pair: every word pair co-occurs once
    assert align(pairs, iterations=1, null_probability=0.0) == [[0, 1, 2, 3]]


def test_empty_sides_align_nothing_and_the_others_are_unaffected():
    pairs, _ = corpus(50)
    found = align(pairs + [([], [5, 6]), ([1, 2], [])])
    assert found[-2:] == [[NO_SOURCE, NO_SOURCE], []]
    assert found[:-2] == align(pairs)


def test_the_guide_keeps_only_the_links_both_directions_agree_on():
    pairs, truths = corpus()
    forward = align(pairs)
    backward = align([(t, s) for s, t in pairs])
    guided = guide(pairs)
    for f, b, g in zip(forward, backward, guided):
        assert g == [i if i != NO_SOURCE and b[i] == j else NO_SOURCE for j, i in enumerate(f)]
    kept = [(i, t) for g, t in zip(guided, truths) for i, t in zip(g, t) if i != NO_SOURCE]
    assert len(kept) > 0.9 * sum(t != NO_SOURCE for truth in truths for t in truth)
    assert sum(i == t for i, t in kept) / len(kept) > 0.99
