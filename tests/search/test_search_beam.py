"""The shared beam core: log-add, merging by key, top-k and joint pruning."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speechlab.search import Beam, Hypothesis, log_add, merge_max, topk_together


def test_log_add_matches_direct_formula_and_handles_inf():
    for a, b in [(-1.0, -2.0), (-700.0, -701.0), (0.0, 0.0), (-3.5, -3.5)]:
        shift = 600.0 if a < -600 else 0.0  # keep exp() away from underflow
        direct = math.log(math.exp(a + shift) + math.exp(b + shift)) - shift
        assert log_add(a, b) == pytest.approx(direct, abs=1e-12)
        assert log_add(a, b) == log_add(b, a)
    assert log_add(-math.inf, -2.0) == -2.0
    assert log_add(-1.0, -math.inf) == -1.0
    assert log_add(-math.inf, -math.inf) == -math.inf


def test_same_tokens_merge_by_logadd_and_keep_better_state():
    beam = Beam()
    beam.add(Hypothesis((1, 2), math.log(0.2), state="worse"))
    beam.add(Hypothesis((1, 2), math.log(0.3), state="better"))
    beam.add(Hypothesis((1,), math.log(0.1), state="other"))
    assert len(beam) == 2
    merged = beam.get((1, 2))
    assert merged.score == pytest.approx(math.log(0.5))
    assert merged.state == "better"


def test_max_merge_and_custom_key():
    # A WFST-style search keys by graph state: different label sequences reaching state 7 merge.
    beam = Beam(merge=merge_max)
    beam.add(Hypothesis((1,), -2.0, key=7))
    beam.add(Hypothesis((2, 3), -1.0, key=7))
    beam.add(Hypothesis((4,), -5.0, key=8))
    assert len(beam) == 2
    assert beam.get(7).tokens == (2, 3) and beam.get(7).score == -1.0
    assert beam.best().tokens == (2, 3)


def test_topk_prune_and_tie_order():
    hyps = [Hypothesis((i,), s) for i, s in enumerate([-3.0, -1.0, -2.0, -1.0, -9.0])]
    beam = Beam(hyps)
    assert [h.tokens for h in beam.topk(3).sorted()] == [(1,), (3,), (2,)]
    assert beam.best().tokens == (1,)  # first of two equal scores
    assert {h.tokens for h in beam.prune(0.5)} == {(1,), (3,)}
    assert {h.tokens for h in beam.prune(1.0)} == {(1,), (3,), (2,)}  # boundary is kept
    assert len(beam.topk(10)) == 5
    with pytest.raises(ValueError):
        beam.topk(0)
    with pytest.raises(ValueError):
        Beam().best()


def test_extend_and_rescore_do_not_mutate():
    h = Hypothesis((1,), -1.0, state="s", key="k")
    e = h.extend(5, -0.5, state="t")
    assert (e.tokens, e.score, e.state, e.merge_key) == ((1, 5), -1.5, "t", (1, 5))
    r = h.rescore(-2.0)
    assert (r.tokens, r.score, r.merge_key) == ((1,), -3.0, "k")
    assert h.score == -1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(-20, 0), max_size=6), min_size=1, max_size=3), st.integers(1, 8))
def test_topk_together_keeps_global_best_k(score_lists, k):
    beams = [Beam(Hypothesis((b, i), float(s)) for i, s in enumerate(scores))
             for b, scores in enumerate(score_lists)]
    kept = topk_together(beams, k)
    # Brute force: sort everything by (score desc, beam, insertion) and take k.
    everything = sorted(((-float(s), b, i) for b, scores in enumerate(score_lists) for i, s in enumerate(scores)))
    expected = {(b, i) for _s, b, i in everything[:k]}
    got = {h.tokens for bm in kept for h in bm}
    assert got == expected
    for b, bm in enumerate(kept):
        assert all(h.tokens[0] == b for h in bm)


def test_select_is_the_one_pruning_rule_of_beam_and_array_searches():
    import numpy as np

    from speechlab.search import select
    from speechlab.search.beam import select_kernel

    scores = [-1.0, -3.0, -1.0, -0.5, -20.0]
    assert select(scores, 3).tolist() == [3, 0, 2]  # best first, ties by position
    assert select(scores, 10, threshold=2.0).tolist() == [3, 0, 2]
    assert select([], 2).tolist() == []
    x = np.array(scores)
    assert select_kernel(x, 2, np.inf).tolist() == [3, 0]
    beam = Beam(Hypothesis((i,), s) for i, s in enumerate(scores))
    assert [h.tokens[0] for h in beam.topk(3)] == select(scores, 3).tolist()
    with pytest.raises(ValueError):
        select(scores, 0)
