"""The properties of TOPOLOGIES.md for every topology, and the loss graphs built from them.

References are independent of :mod:`speechlab.asr.ctc.loss_graphs` and its kernel: the token graph
``T`` of ``topology.arcs`` walked arc by arc (:mod:`speechlab.testing.graphs`), brute-force
enumeration of token sequences, and OpenFst's composition (``kaldifst.compose``).
"""

from __future__ import annotations

import itertools
from collections import Counter

import kaldifst
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speechlab.asr.ctc import loss_graphs, topology
from speechlab.asr.ctc._graph_numba import log_total_score
from speechlab.testing.graphs import count_paths, fst_arcs, token_sequences
from speechlab.testing.graphs import log_total_score as reference_log_score

NAMES = list(topology.TOPOLOGIES)
SETTINGS = settings(max_examples=25, deadline=None)


def kernel_log_score(g: loss_graphs.GraphBatch, log_probs: np.ndarray, b: int = 0) -> float:
    """log TotalScore of utterance b's graph under (T, V) log_probs, by the loss's kernel."""
    one = g.select(b)
    empty = np.zeros((0, 0, 0))
    return log_total_score(log_probs[None], 0, log_probs.shape[0], one.arrays(), 0, 1.0,
                           False, empty, -708.0)


def as_arcs(g: loss_graphs.GraphBatch) -> topology.Arcs:
    """An epsilon-free one-utterance GraphBatch as an arc list (tokens = columns, blank 0)."""
    assert g.eps[0] == g.hi[0]
    dst = np.repeat(np.arange(len(g.column)), np.diff(g.in_ptr))
    return topology.Arcs(len(g.column), g.in_src.copy(), dst, g.column[dst],
                         np.zeros_like(dst), int(g.start[0]), g.final.copy())


def phone_problems(max_phones: int = 3, max_len: int = 3):
    """(topology name, P, phone sequence) with phones in 1..P."""
    return st.tuples(st.sampled_from(NAMES), st.integers(1, max_phones)).flatmap(
        lambda np_: st.tuples(
            st.just(np_[0]), st.just(np_[1]),
            st.lists(st.integers(1, np_[1]), max_size=max_len),
        )
    )


def numerator_of(name: str, num_phones: int, phones: list[int]) -> loss_graphs.GraphBatch:
    return loss_graphs.numerator(name, np.array([phones + [0]]), np.array([len(phones)]),
                           num_phones).select(0)


# ------------------------------------------------------------------------------------------
# The topologies as data


def test_the_eight_topologies_of_the_table():
    table = {  # TOPOLOGIES.md: states, min frames, self-loops, skips
        "S1-T1": (1, 1, (0,), ()),
        "S2-T1": (2, 1, (1,), ((0, topology.EXIT),)),
        "S2-T1★": (2, 1, (0, 1), ((0, topology.EXIT),)),
        "S2-T2": (2, 2, (1,), ()),
        "S2-T2★": (2, 2, (0, 1), ()),
        "S3-T2": (3, 2, (1,), ((0, 2),)),
        "S3-T2★": (3, 2, (1, 2), ((0, 2),)),
        "S3-T2★★": (3, 2, (0, 1, 2), ((0, 2),)),
    }
    assert set(topology.TOPOLOGIES) == set(table)
    for name, (states, min_frames, loops, skips) in table.items():
        topo = topology.get(name.replace("★", "*"))
        assert (topo.states, topo.min_frames, topo.loops, topo.skips) == (
            states, min_frames, loops, skips)
        assert topo.ctc_rule == (name == "S1-T1")
        assert topology.num_tokens(name, 5) == 1 + 5 * states


@given(phone_problems(max_len=1).filter(lambda p: len(p[2]) == 1))
@SETTINGS
def test_shortest_path_of_one_phone_has_min_frames_and_no_blank(problem):
    name, num_phones, phones = problem
    topo = topology.get(name)
    t_graph = topology.arcs(name, num_phones)
    vocab = topology.num_tokens(name, num_phones)
    for frames in range(topo.min_frames + 1):
        seqs = token_sequences(vocab, frames)
        counts = count_paths(t_graph, seqs, phones)
        if frames < topo.min_frames:
            assert counts.sum() == 0
        else:
            accepted = seqs[counts > 0]
            assert len(accepted) > 0 and np.all(accepted != 0)  # blank skipped
    # The numerator graph agrees: no path below min frames, one with blank forbidden at it.
    num = numerator_of(name, num_phones, phones)
    for frames in range(topo.min_frames + 2):
        log_probs = np.zeros((frames, vocab))
        log_probs[:, 0] = -np.inf
        feasible = kernel_log_score(num, log_probs) > -np.inf
        assert feasible == (frames >= topo.min_frames)


def numerator_paths(num: loss_graphs.GraphBatch, frames: int) -> list[list[int]]:
    """Every accepted node sequence of a one-utterance numerator (start node first)."""
    into = {n: num.in_src[num.in_ptr[n]:num.in_ptr[n + 1]] for n in range(len(num.column))}
    out: dict[int, list[int]] = {n: [] for n in range(len(num.column))}
    for n, srcs in into.items():
        for s in srcs:
            out[int(s)].append(n)
    paths = [[int(num.start[0])]]
    for _ in range(frames):
        paths = [p + [d] for p in paths for d in out[p[-1]]]
    return [p for p in paths if num.final[p[-1]]]


@given(phone_problems(max_phones=2), st.integers(0, 5))
@SETTINGS
def test_every_numerator_path_is_a_path_of_t_that_outputs_the_transcript(problem, frames):
    """Numerator node ``k (x+1) + slot`` is T's state ``column`` (T's state ids are token ids)
    with k phones output (k + 1 for phone slots): consecutive nodes must be an arc of T with
    that token whose output label is y_{k'} exactly when k' = k + 1, ending in a final state
    of T after all phones.  And the number of such paths per token sequence equals the
    brute-force count of T's paths reading it with output y."""
    name, num_phones, phones = problem
    x = topology.get(name).states
    t_graph = topology.arcs(name, num_phones)
    t_arcs = Counter(zip(t_graph.src.tolist(), t_graph.dst.tolist(), t_graph.label.tolist()))
    num = numerator_of(name, num_phones, phones)

    def done(node: int) -> int:
        block, slot = divmod(node, x + 1)
        return block + (slot > 0)

    per_sequence: Counter = Counter()
    for path in numerator_paths(num, frames):
        states = [int(num.column[n]) for n in path]
        assert states[0] == t_graph.start
        for (a, b), (s, d) in zip(zip(path, path[1:]), zip(states, states[1:])):
            k, k2 = done(a), done(b)
            assert k2 in (k, k + 1)
            label = phones[k] if k2 == k + 1 else 0
            assert t_arcs[(s, d, label)] >= 1
        assert done(path[-1]) == len(phones) and t_graph.final[states[-1]]
        per_sequence[tuple(states[1:])] += 1

    vocab = topology.num_tokens(name, num_phones)
    seqs = token_sequences(vocab, frames)
    counts = count_paths(t_graph, seqs, phones)
    expected = {tuple(s): int(c) for s, c in zip(seqs.tolist(), counts) if c}
    assert dict(per_sequence) == expected


@given(phone_problems(max_phones=2), st.integers(0, 6), st.integers(0, 2**31 - 1))
@SETTINGS
def test_numerator_equals_kaldifst_composition_of_t_and_the_linear_acceptor(
    problem, frames, seed
):
    name, num_phones, phones = problem
    t_fst = topology.build(name, num_phones)
    # compose matches T's output labels against W: T must be sorted on them (build() sorts
    # on input labels, for decoding; unsorted, compose silently drops paths).
    kaldifst.arcsort(t_fst, sort_type="olabel")
    composed = fst_arcs(kaldifst.compose(t_fst, kaldifst.make_linear_acceptor(phones)))
    num = numerator_of(name, num_phones, phones)
    assert len(num.column) == composed.num_states
    assert len(num.in_src) == len(composed.src)
    vocab = topology.num_tokens(name, num_phones)
    rng = np.random.default_rng(seed)
    for log_probs in (np.zeros((frames, vocab)), rng.normal(size=(frames, vocab))):
        # zeros: log of the number of paths of length T; normal: total scores
        expected = reference_log_score(composed, log_probs)
        ours = reference_log_score(as_arcs(num), log_probs)
        kernel = kernel_log_score(num, log_probs)
        if expected == -np.inf:
            assert ours == -np.inf and kernel == -np.inf
        else:
            assert ours == pytest.approx(expected, rel=1e-12, abs=1e-12)
            assert kernel == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_numerator_batch_equals_its_utterances_built_alone():
    targets = np.array([[2, 2, 1], [1, -5, 99], [3, 1, 3]])  # padding holds anything
    lengths = np.array([3, 1, 0])
    for name in NAMES:
        batch = loss_graphs.numerator(name, targets, lengths, 3)
        assert np.array_equal(batch.lo[1:], batch.hi[:-1]) and batch.lo[0] == 0
        for b in range(3):
            alone = numerator_of(name, 3, targets[b, :lengths[b]].tolist())
            one = batch.select(b)
            for field in ("column", "in_ptr", "in_src", "out_ptr", "out_dst", "final"):
                assert np.array_equal(getattr(one, field), getattr(alone, field)), field


# ------------------------------------------------------------------------------------------
# Denominator: T itself (eq. 5)


@given(st.sampled_from(NAMES), st.integers(1, 2), st.integers(0, 3))
@SETTINGS
def test_denominator_accepts_every_token_sequence_of_t_with_its_path_count(
    name, num_phones, frames
):
    t_graph = topology.arcs(name, num_phones)
    den = loss_graphs.denominator(name, num_phones)
    vocab = topology.num_tokens(name, num_phones)
    seqs = token_sequences(vocab, frames)
    expected = count_paths(t_graph, seqs)
    for seq, count in zip(seqs, expected):
        log_probs = np.full((frames, vocab), -np.inf)
        log_probs[np.arange(frames), seq] = 0.0  # only this sequence scores
        score = kernel_log_score(den, log_probs)
        assert (score == -np.inf) if count == 0 else score == pytest.approx(np.log(count))


@given(st.sampled_from(NAMES), st.integers(1, 6), st.integers(0, 12),
       st.integers(0, 2**31 - 1))
@SETTINGS
def test_denominator_total_score_equals_t_arc_by_arc(name, num_phones, frames, seed):
    log_probs = np.random.default_rng(seed).normal(
        size=(frames, topology.num_tokens(name, num_phones)))
    expected = reference_log_score(topology.arcs(name, num_phones), log_probs)
    ours = kernel_log_score(loss_graphs.denominator(name, num_phones), log_probs)
    assert ours == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("frames", [1, 2, 4])
def test_s1_t1_accepts_every_token_sequence_exactly_once(frames):
    seqs = token_sequences(4, frames)
    assert np.all(count_paths(topology.arcs("S1-T1", 3), seqs) == 1)


@given(st.integers(1, 40), st.integers(0, 50), st.integers(0, 2**31 - 1))
@SETTINGS
def test_s1_t1_denominator_is_one_for_normalised_emissions(num_phones, frames, seed):
    logits = np.random.default_rng(seed).normal(scale=3.0, size=(frames, num_phones + 1))
    log_probs = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    score = kernel_log_score(loss_graphs.denominator("S1-T1", num_phones), log_probs)
    assert score == pytest.approx(0.0, abs=1e-12)


def test_other_topologies_denominator_is_below_one():
    """Only S1-T1 accepts every token sequence: for the others eq. (5) is < 1."""
    rng = np.random.default_rng(0)
    for name in NAMES[1:]:
        vocab = topology.num_tokens(name, 3)
        logits = rng.normal(size=(6, vocab))
        log_probs = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
        assert kernel_log_score(loss_graphs.denominator(name, 3), log_probs) < -1e-3


def test_columns_move_the_blank_and_keep_phone_tokens_in_order():
    topo = topology.get("S2-T1")
    assert loss_graphs.columns(topo, 2).tolist() == [0, 1, 2, 3, 4]
    assert loss_graphs.columns(topo, 2, blank=4).tolist() == [4, 0, 1, 2, 3]
    assert loss_graphs.columns(topo, 2, blank=2).tolist() == [2, 0, 1, 3, 4]


# ------------------------------------------------------------------------------------------
# Against the authors' token FSTs

# The per-phone token language of each of the authors' published token FSTs (the Waterfall
# recipes' ``ctc mmictc mmictc-1 2state 2state-1 3state-skip 3state-skip-1 3state-skip-2``, in
# the order of the paper's tables), written as regular expressions over the phone's states
# a, b, c (= p0, p1, p2), independently of ``topology.py``. Between phones and at both ends an
# optional run of blanks ("_"); under CTC a phone cannot follow itself without one.
AUTHORS = {
    "S1-T1": "a+",
    "S2-T1": "ab*",
    "S2-T1★": "a+b*",
    "S2-T2★": "a+b+",
    "S2-T2": "ab+",
    "S3-T2": "ab*c",
    "S3-T2★": "ab*c+",  # 3state-skip-1: the extra self-loop on the last state
    "S3-T2★★": "a+b*c+",
}


def authors_accept(name: str, tokens: tuple[int, ...], phones: list[int]) -> bool:
    """Whether the authors' topology reads ``tokens`` (topology token ids) with output
    ``phones``: spell each token as "_" or (phone, state letter) and match one regex."""
    import re

    x = topology.get(name).states
    spelled = "".join("_" if t == 0 else f"<{(t - 1) // x + 1}>{'abc'[(t - 1) % x]}"
                      for t in tokens)
    unit = AUTHORS[name].replace("a", "{p}a").replace("b", "{p}b").replace("c", "{p}c")
    # Group each repeated state letter with its phone tag: "{p}a+" means one or more "<p>a".
    unit = re.sub(r"\{p\}([abc])([+*]?)", r"(?:{p}\1)\2", unit)
    parts = [unit.format(p=re.escape(f"<{p}>")) for p in phones]
    if not parts:
        return re.fullmatch("_*", spelled) is not None
    seps = ["_*"] + [("_+" if name == "S1-T1" and phones[i] == phones[i + 1] else "_*")
                     for i in range(len(phones) - 1)] + ["_*"]
    pattern = seps[0] + "".join(part + sep for part, sep in zip(parts, seps[1:]))
    return re.fullmatch(pattern, spelled) is not None


@pytest.mark.parametrize("name", NAMES)
def test_path_sets_equal_the_authors_token_fsts(name):
    """Every token sequence over 2 and 3 phones, as long as there are at most 6,000 of a
    length (5-7 frames over 2 phones): T accepts it with output y exactly when the authors'
    topology does, for every y of up to 3 phones."""
    for num_phones in (2, 3):
        t_graph = topology.arcs(name, num_phones)
        vocab = topology.num_tokens(name, num_phones)
        transcripts = [list(y) for n in range(4)
                       for y in itertools.product(range(1, num_phones + 1), repeat=n)]
        for frames in range(int(np.log(6000) / np.log(vocab)) + 1):
            seqs = token_sequences(vocab, frames)
            for phones in transcripts:
                ours = count_paths(t_graph, seqs, phones) > 0
                theirs = np.array([authors_accept(name, tuple(s), phones) for s in seqs])
                assert np.array_equal(ours, theirs), (name, phones, seqs[ours != theirs][:3])


def test_s3_t2_star_is_a0_a1star_a2plus():
    """The issue's cases: S3-T2★ rejects a0 a0 a2 and accepts a0 a2 a2."""
    t_graph = topology.arcs("S3-T2★", 1)
    three = np.array([[1, 1, 3], [1, 3, 3], [1, 2, 3]])
    assert (count_paths(t_graph, three, [1]) > 0).tolist() == [False, True, True]
    assert count_paths(t_graph, np.array([[1, 2, 2, 3, 3]]), [1]).tolist() == [1]
