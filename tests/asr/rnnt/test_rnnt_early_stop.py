"""Early stopping, Eq. (1)-(2) of the multi-softmax paper, against a direct loop."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from speechlab.asr.rnnt import EarlyStopper, active_frames, t_avg
from speechlab.errors import ConfigError, DataError

INF = math.inf


def loop_reference(lp, tau, s_th):
    """Eq. (1) and the switch-off rule of Section 6.3, written out frame by frame."""
    T, L = len(lp), len(lp[0])
    s = [0.0] * L
    on = [True] * L
    frames = [T] * L
    for t in range(T):
        for l in range(L):
            s[l] += lp[t][l]
        best = max(s)
        for l in range(L):
            if on[l] and t > tau and s[l] < best - s_th:
                on[l] = False
                frames[l] = t + 1
    return frames


PLANTED = torch.tensor([[-0.5, -1.0, -2.0]] * 6)  # s_l(t) = -(t+1) * (0.5, 1, 2)


@pytest.mark.parametrize("tau,s_th,expected", [
    # t=2: threshold -3.0, Hindi at exactly -3.0 stays (tie), Tamil -6 goes after 3 frames;
    # t=3: threshold -3.5, Hindi -4 goes after 4 frames.
    (1, 1.5, [6, 4, 3]),
    (-1, 1.5, [6, 4, 2]),       # no wait: Tamil goes at t=1 (-4 < -2.5)
    (2, 1.5, [6, 4, 4]),        # t must be > tau: t=2 is not eligible
    (INF, 0.0, [6, 6, 6]),
    (0, INF, [6, 6, 6]),
    (INF, INF, [6, 6, 6]),
    (0, 0.0, [6, 2, 2]),
])
def test_planted_posteriors(tau, s_th, expected):
    got = active_frames(PLANTED, tau, s_th)
    assert got.dtype == torch.long and got.tolist() == expected
    assert loop_reference(PLANTED.tolist(), tau, s_th) == expected
    assert t_avg(got, 6) == pytest.approx(sum(expected) / 6)


def test_ties_at_the_top_keep_everyone_on():
    lp = torch.full((5, 4), math.log(0.25))
    assert active_frames(lp, -1, 0.0).tolist() == [5, 5, 5, 5]
    assert t_avg(active_frames(lp, -1, 0.0), 5) == 4.0  # Table 7, first row: all 4 decoders


def test_off_is_for_good_even_if_the_language_recovers():
    # Language 1 falls behind first, is switched off, then overtakes; language 0 then goes too.
    # s_0 = -0.25, -0.5, -2.5, -4.5, -6.5 and s_1 = -1, -2, -2.25, -2.5, -2.75:
    # t=1: 1 goes (-2 < -0.75); t=2: 0 is exactly 0.25 below the best, stays; t=3: 0 goes.
    lp = torch.tensor([[-0.25, -1.0], [-0.25, -1.0], [-2.0, -0.25], [-2.0, -0.25], [-2.0, -0.25]])
    assert active_frames(lp, 0, 0.25).tolist() == [4, 2]
    assert loop_reference(lp.tolist(), 0, 0.25) == [4, 2]


def test_edge_cases_and_errors():
    assert active_frames(torch.zeros(0, 3), 1, 0.5).tolist() == [0, 0, 0]
    assert t_avg(torch.zeros(3, dtype=torch.long), 0) == 0.0
    # A zero posterior (log 0) is far behind any finite score.
    lp = torch.tensor([[0.0, -INF], [0.0, -INF]])
    assert active_frames(lp, -1, 10.0).tolist() == [2, 1]
    assert active_frames(lp, -1, INF).tolist() == [2, 2]
    with pytest.raises(DataError, match=r"\(T, L\)"):
        active_frames(torch.zeros(2, 3, 4), 1, 1)
    with pytest.raises(DataError, match="nan"):
        active_frames(torch.tensor([[math.nan, 0.0]]), 1, 1)
    with pytest.raises(ConfigError, match="s_th must be >= 0"):
        active_frames(PLANTED, 1, -0.5)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 12).flatmap(lambda T: st.integers(1, 4).flatmap(
        lambda L: st.lists(st.lists(st.integers(-12, 0), min_size=L, max_size=L), min_size=T, max_size=T))),
    st.sampled_from([-1, 0, 1, 3, 7, INF]),
    st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.5, INF]),
    st.lists(st.integers(1, 5), min_size=1, max_size=12),
)
def test_random_quarter_grid_matches_loop_and_streaming(rows, tau, s_th, chunks):
    # Multiples of 1/4 sum exactly, so ties are real ties.
    lp = torch.tensor(rows, dtype=torch.float32) / 4
    expected = loop_reference(lp.double().tolist(), tau, s_th)
    assert active_frames(lp, tau, s_th).tolist() == expected
    stopper = EarlyStopper(lp.shape[1], tau, s_th)
    for t in range(lp.shape[0]):
        running = stopper.step(lp[t])
        assert running.tolist() == [expected[l] > t for l in range(lp.shape[1])]
    assert stopper.frames.tolist() == expected
    # streamed in chunks of the drawn sizes
    stopper, t = EarlyStopper(lp.shape[1], tau, s_th), 0
    for n in chunks + [lp.shape[0]]:
        for k, row in enumerate(stopper.steps(lp[t: t + n]).tolist()):
            assert row == [expected[l] > t + k for l in range(lp.shape[1])]
        t = min(t + n, lp.shape[0])
    assert stopper.frames.tolist() == expected


def test_random_float_posteriors_match_loop():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        lp = torch.randn(50, 4, generator=g).log_softmax(-1)
        for tau, s_th in [(5, 0.5), (0, 2.0), (10, 0.2)]:
            assert active_frames(lp, tau, s_th).tolist() == loop_reference(lp.double().tolist(), tau, s_th)


@settings(deadline=None)
@given(
    st.integers(1, 30),
    st.integers(1, 4),
    st.sampled_from([-1, 0, 1, 3, 7, INF]),
    st.sampled_from([0.0, 0.25, 0.5, 1.0, INF]),
    st.lists(st.integers(0, 7), min_size=1, max_size=12),
    st.integers(0, 2**31 - 1),
    st.booleans(),
)
def test_steps_of_a_chunk_are_steps_frame_by_frame(T, L, tau, s_th, chunks, seed, quarters):
    """``steps`` on any chunking (empty chunks too) gives what ``step`` gives frame by frame:
    the same decoders running, and the same scores to the bit."""
    g = torch.Generator().manual_seed(seed)
    lp = (torch.randint(-12, 1, (T, L), generator=g).double() / 4 if quarters  # real ties
          else torch.randn(T, L, generator=g, dtype=torch.float64).log_softmax(-1))
    one, chunked = EarlyStopper(L, tau, s_th), EarlyStopper(L, tau, s_th)
    expected = torch.stack([one.step(lp[t]) for t in range(T)])
    got, t = [], 0
    for n in chunks + [T]:
        got.append(chunked.steps(lp[t: t + n]))
        t = min(T, t + n)
    assert torch.equal(torch.cat(got), expected)
    assert torch.equal(chunked.scores, one.scores)
    assert torch.equal(chunked.frames, one.frames) and torch.equal(chunked.on, one.on)
    assert chunked.t == one.t == T
