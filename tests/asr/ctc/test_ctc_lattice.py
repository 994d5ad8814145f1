"""Lattices, BPP/BHP (eqs. 10-11) and lattice full-sum decoding (eq. 9) against brute force.

Every test builds a tiny ``T o L o G`` by hand (<= 3 words, <= 3 phones, T <= 6 frames) and
enumerates every path of ``E o S`` (``speechlab.testing.lattice_paths``); with unbounded beams the
lattice must hold exactly those paths, and every metric must equal its brute-force value.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from speechlab.asr.ctc import lattice as L
from speechlab.asr.ctc import lattice_metrics as M
from speechlab.asr.ctc import topology
from speechlab.errors import DataError
from speechlab.testing import lattice_paths as fp

EVERYTHING = L.LatticeConfig(beam=1e9, max_active=0, lattice_beam=1e9, unique_paths=False)
EVERYTHING_UNIQUE = L.LatticeConfig(beam=1e9, max_active=0, lattice_beam=1e9, unique_paths=True)

# word -> pronunciations over phones 1..2; word 3 has two, one a prefix of word 2's.
LEXICON = {1: [(1,)], 2: [(2, 1)], 3: [(1, 2), (2,)]}


def grammar(kind: str):
    if kind == "unigram":
        return fp.unigram_fst({1: 0.3, 2: 0.3, 3: 0.4}, end=0.5)
    # backoff: "1 2" and "2 1" have two G paths each (explicit bigram and backoff)
    return fp.bigram_fst({1: 0.3, 2: 0.3, 3: 0.4}, {(1, 2): 0.5, (2, 1): 0.4}, backoff=0.5)


def emission(num_frames: int, num_tokens: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.log(rng.dirichlet(np.ones(num_tokens) * 0.7, size=num_frames))


CASES = [("S1-T1", "bigram", 5, 0), ("S1-T1", "unigram", 6, 1), ("S2-T1★", "bigram", 5, 2),
         ("S3-T2", "bigram", 6, 3), ("S2-T2", "unigram", 6, 4)]


@pytest.fixture(scope="module", params=CASES, ids=[f"{c[0]}-{c[1]}-T{c[2]}" for c in CASES])
def case(request):
    topo, g, num_frames, seed = request.param
    fst = fp.decoding_graph(topo, 2, LEXICON, grammar(g))
    logp = emission(num_frames, topology.num_tokens(topo, 2), seed)
    graph = L.DecodingGraph.from_fst(fst)
    paths = fp.enumerate_paths(fst, logp)
    assert paths, "the case must have paths"
    return fst, graph, logp, paths


def key(p: fp.Path, digits: int = 4):
    return p.tokens, p.words, round(p.graph_cost, digits), round(p.loglik, 6)


def weight(p: fp.Path, score: str) -> float:
    return p.loglik if score == "acoustic" else p.total()


def by_words(paths, score):
    hyps: dict[tuple[int, ...], list[float]] = {}
    for p in paths:
        hyps.setdefault(p.words, []).append(weight(p, score))
    return hyps


def test_unpruned_lattice_holds_exactly_the_paths_of_the_composition(case):
    _, graph, logp, paths = case
    lat = L.generate(graph, logp, EVERYTHING, utt="u1")
    assert sorted(map(key, fp.lattice_paths(lat))) == sorted(map(key, paths))
    assert np.all(lat.src < lat.dst) and np.all(np.diff(lat.src) >= 0)  # topologically sorted
    assert lat.frame[-1] <= logp.shape[0] and lat.frame[0] == 0


def test_unique_lattice_holds_one_path_per_tokens_and_words(case):
    _, graph, logp, paths = case
    lat = L.generate(graph, logp, EVERYTHING_UNIQUE)
    got = sorted(((p.tokens, p.words), p.total(), p.loglik) for p in fp.lattice_paths(lat))
    want = sorted(((p.tokens, p.words), p.total(), p.loglik) for p in fp.unique(paths))
    assert [g[0] for g in got] == [w[0] for w in want]
    np.testing.assert_allclose([g[1] for g in got], [w[1] for w in want], atol=1e-9)
    np.testing.assert_allclose([g[2] for g in got], [w[2] for w in want], atol=1e-9)


def test_unique_paths_merge_duplicates_whose_words_sit_on_different_frames():
    # Two graph paths spell tokens (1, 2) as word 7: one says so on the first frame, the other
    # (as a determinised L o G does behind a backoff arc) only on the second. A third path
    # spells (1, 2) as word 8, and (2, 2) is word 7 again.
    fst = fp.fst_from_text("\n".join([
        "0 1 2 7 0.5", "1 2 3 0 0.0",   # tok 1 : 7, tok 2
        "0 3 2 0 0.2", "3 2 3 7 0.9",   # tok 1, tok 2 : 7 (costlier: the one to drop)
        "0 4 2 8 1.0", "4 2 3 0 0.0",   # tok 1 : 8, tok 2
        "0 5 3 7 0.3", "5 2 3 0 0.0",   # tok 2 : 7, tok 2
        "2"]))
    logp = emission(2, 3, 0)
    paths = fp.enumerate_paths(fst, logp)
    assert len(paths) == 4 and len(fp.unique(paths)) == 3
    lat = L.generate(L.DecodingGraph.from_fst(fst), logp, EVERYTHING_UNIQUE)
    got = sorted((p.tokens, p.words, round(p.graph_cost, 6)) for p in fp.lattice_paths(lat))
    assert got == [((1, 2), (7,), 0.5), ((1, 2), (8,), 1.0), ((2, 2), (7,), 0.3)]
    props = M.path_proportions(lat, hypothesis=[7])
    mine = [logp[0, 1] + logp[1, 2], logp[0, 2] + logp[1, 2]]
    assert props.bpp == pytest.approx(math.exp(max(mine) - fp.logsumexp(mine)))
    with pytest.raises(DataError, match="utt-x.*lattice beam"):
        L.unique_paths(L.generate(L.DecodingGraph.from_fst(fst), logp, EVERYTHING, utt="utt-x"),
                       max_states=2)


def test_backoff_grammar_has_duplicates_that_unique_paths_removes():
    """A back-off grammar gives some (tokens, words) sequences two graph paths (the n-gram and
    the back-off route). The lattice keeps both until unique_paths, which keeps the cheaper,
    and the lattice's paths are then the oracle's unique ones, with their costs."""
    fst = fp.decoding_graph("S1-T1", 2, LEXICON, grammar("bigram"))
    logp = emission(5, 3, 0)
    paths = fp.enumerate_paths(fst, logp)
    assert len(fp.unique(paths)) < len(paths)  # the planted duplicates exist
    graph = L.DecodingGraph.from_fst(fst)
    raw = fp.lattice_paths(L.generate(graph, logp, EVERYTHING))
    seqs = [(p.tokens, p.words) for p in raw]
    assert len(set(seqs)) < len(seqs)  # the lattice holds them too ...
    kept = fp.lattice_paths(L.unique_paths(L.generate(graph, logp, EVERYTHING)))
    kept_seqs = [(p.tokens, p.words) for p in kept]
    assert len(set(kept_seqs)) == len(kept_seqs)  # ... and unique_paths leaves one each
    want = {(p.tokens, p.words): round(p.graph_cost, 4) for p in fp.unique(paths)}
    assert {(p.tokens, p.words): round(p.graph_cost, 4) for p in kept} == want


@pytest.mark.parametrize("score", ["acoustic", "total"])
@pytest.mark.parametrize("unique", [False, True])
def test_bpp_bhp_equal_brute_force(case, score, unique):
    _, graph, logp, paths = case
    lat = L.generate(graph, logp, EVERYTHING_UNIQUE if unique else EVERYTHING)
    ref = fp.unique(paths) if unique else paths
    viterbi = max(ref, key=lambda p: p.total())
    props = M.path_proportions(lat, score=score)
    assert props.hypothesis == viterbi.words
    mine = [weight(p, score) for p in ref if p.words == viterbi.words]
    everything = [weight(p, score) for p in ref]
    bpp = math.exp(max(mine) - fp.logsumexp(mine))
    bhp = math.exp(fp.logsumexp(mine) - fp.logsumexp(everything))
    tol = 1e-9
    assert props.bpp == pytest.approx(bpp, rel=tol, abs=tol)
    assert props.bhp == pytest.approx(bhp, rel=tol, abs=tol)
    # any other hypothesis of the lattice, given explicitly
    other = sorted(by_words(ref, score))[0]
    mine = by_words(ref, score)[other]
    props = M.path_proportions(lat, other, score=score)
    assert props.bpp == pytest.approx(math.exp(max(mine) - fp.logsumexp(mine)), rel=tol, abs=tol)


def test_best_path_is_the_brute_force_viterbi_path_and_the_kaldi_decoder_s(case):
    import kaldi_decoder

    fst, graph, logp, paths = case
    lat = L.generate(graph, logp, EVERYTHING)
    best = lat.best_path()
    ref = max(paths, key=lambda p: p.total())
    assert best.words == ref.words and best.tokens == ref.tokens
    assert best.score == pytest.approx(ref.total(), abs=1e-5)
    assert best.loglik == pytest.approx(ref.loglik, abs=1e-9)
    dec = kaldi_decoder.FasterDecoder(fst, kaldi_decoder.FasterDecoderOptions(beam=1e4))
    dec.decode(kaldi_decoder.DecodableCtc(logp.astype(np.float32)))
    import kaldifst

    ok, kaldi_best = dec.get_best_path()
    _, _, words, _ = kaldifst.get_linear_symbol_sequence(kaldi_best)
    assert tuple(words) == best.words


@pytest.mark.parametrize("score", ["acoustic", "total"])
def test_fullsum_best_and_nbest_equal_brute_force(case, score):
    _, graph, logp, paths = case
    lat = L.generate(graph, logp, EVERYTHING_UNIQUE)
    sums = {w: fp.logsumexp(v) for w, v in by_words(fp.unique(paths), score).items()}
    ranked = sorted(sums.items(), key=lambda kv: -kv[1])
    res = M.fullsum_best(lat, score=score)
    assert sums[res.words] == pytest.approx(ranked[0][1], abs=1e-9)
    assert res.log_prob == pytest.approx(ranked[0][1], abs=1e-9)
    viterbi = max(fp.unique(paths), key=lambda p: p.total()).words
    assert res.viterbi_words == viterbi and res.agrees == (res.words == viterbi)
    assert res.log_prob_viterbi == pytest.approx(sums[viterbi], abs=1e-9)
    nbest = M.fullsum_nbest(lat, n=len(ranked) + 3, score=score)
    # every hypothesis once, in order (homophone sequences tie under "acoustic")
    assert sorted(w for w, _ in nbest) == sorted(sums)
    np.testing.assert_allclose([s for _, s in nbest], [s for _, s in ranked], atol=1e-9)
    np.testing.assert_allclose([s for _, s in nbest], [sums[w] for w, _ in nbest], atol=1e-9)


def test_bhp_above_half_means_fullsum_agrees_with_viterbi():
    fst = fp.decoding_graph("S1-T1", 2, LEXICON, grammar("unigram"))
    graph = L.DecodingGraph.from_fst(fst)
    seen = set()
    for seed in range(12):
        lat = L.generate(graph, emission(5, 3, seed), EVERYTHING_UNIQUE)
        for score in ("acoustic", "total"):
            props = M.path_proportions(lat, score=score)
            agrees = M.fullsum_best(lat, score=score).agrees
            if props.bhp > 0.5:
                assert agrees
            seen.add((props.bhp > 0.5, agrees))
    assert (True, True) in seen and (False, False) in seen  # both regimes exercised


@pytest.mark.parametrize("lattice_beam", [0.0, 1.5, 4.0])
def test_lattice_beam_keeps_every_path_within_it_and_only_arcs_on_such_paths(case, lattice_beam):
    # Pruning is per arc, as Kaldi's: an arc stays if the best path through it is within the
    # beam, so paths mixing such arcs may be outside it; every path within it is kept.
    _, graph, logp, paths = case
    cfg = L.LatticeConfig(beam=1e9, max_active=0, lattice_beam=lattice_beam, unique_paths=False)
    lat = L.generate(graph, logp, cfg)
    best = max(p.total() for p in paths)
    kept = set(map(key, fp.lattice_paths(lat)))
    inside = {key(p) for p in paths if p.total() >= best - lattice_beam - 1e-9}
    assert inside <= kept <= set(map(key, paths))
    full = L.generate(graph, logp, EVERYTHING)
    assert lat.num_arcs <= full.num_arcs
    if lattice_beam == 0.0:
        assert kept == inside  # only the best path (no ties in random emissions)
    # each kept arc is on a kept path within the beam: the best path through it
    w, fw = lat.log_weights("total")
    from speechlab.asr.ctc import _lattice_numba as K

    fwd = np.full(lat.num_states, -np.inf)
    fwd[0] = 0.0
    for a in range(lat.num_arcs):
        fwd[lat.dst[a]] = max(fwd[lat.dst[a]], fwd[lat.src[a]] + w[a])
    bwd = fw.copy()
    for a in range(lat.num_arcs - 1, -1, -1):
        bwd[lat.src[a]] = max(bwd[lat.src[a]], w[a] + bwd[lat.dst[a]])
    through = fwd[lat.src] + w + bwd[lat.dst]
    assert np.all(through >= best - lattice_beam - 1e-6)
    assert K.forward_sorted(lat.num_states, lat.src, lat.dst, w, fw)[1] == pytest.approx(best)


def test_acoustic_scale_weights_the_search_and_the_total_score():
    fst = fp.decoding_graph("S1-T1", 2, LEXICON, grammar("bigram"))
    logp = emission(5, 3, 7)
    paths = fp.enumerate_paths(fst, logp)
    cfg = L.LatticeConfig(beam=1e9, max_active=0, lattice_beam=1e9, acoustic_scale=0.3,
                          unique_paths=False)
    lat = L.generate(L.DecodingGraph.from_fst(fst), logp, cfg)
    ref = max(paths, key=lambda p: p.total(0.3))
    assert lat.best_path().words == ref.words
    everything = [p.total(0.3) for p in paths]
    mine = [p.total(0.3) for p in paths if p.words == ref.words]
    props = M.path_proportions(lat, score="total")
    assert props.bhp == pytest.approx(math.exp(fp.logsumexp(mine) - fp.logsumexp(everything)))


def test_total_mass_matches_kaldi_lattice_simple_decoder():
    """The same paths as kaldi-decoder's LatticeSimpleDecoder raw lattice, unpruned."""
    import kaldi_decoder

    fst = fp.decoding_graph("S3-T2", 2, LEXICON, grammar("bigram"))
    logp = emission(6, topology.num_tokens("S3-T2", 2), 11)
    dec = kaldi_decoder.LatticeSimpleDecoder(
        fst, kaldi_decoder.LatticeSimpleDecoderConfig(beam=1e4, lattice_beam=1e4))
    dec.decode(kaldi_decoder.DecodableCtc(logp.astype(np.float32)))
    ok, raw = dec.get_raw_lattice()
    assert ok
    total = _kaldi_total(raw)
    lat = L.generate(L.DecodingGraph.from_fst(fst), logp, EVERYTHING)
    w, fw = lat.log_weights("total")
    from speechlab.asr.ctc import _lattice_numba as K

    mine, _ = K.forward_sorted(lat.num_states, lat.src, lat.dst, w, fw)
    assert mine == pytest.approx(total, abs=1e-4)


def _kaldi_total(raw) -> float:
    """log-sum over the paths of a Kaldi raw lattice (weights ``graph,acoustic`` costs)."""
    arcs, finals = {}, {}
    for line in raw.to_str().splitlines():
        f = line.split()
        if len(f) >= 4:
            g, a = (float(x) for x in f[4].split(",")) if len(f) > 4 else (0.0, 0.0)
            arcs.setdefault(int(f[0]), []).append((int(f[1]), -(g + a)))
        elif f:
            g, a = (float(x) for x in f[1].split(",")) if len(f) > 1 else (0.0, 0.0)
            finals[int(f[0])] = -(g + a)
    memo: dict[int, float] = {}

    def beta(s):
        if s not in memo:
            terms = [finals[s]] if s in finals else []
            terms += [w + beta(d) for d, w in arcs.get(s, ())]
            memo[s] = fp.logsumexp(terms)
        return memo[s]

    return beta(int(raw.start))


def test_planted_dominant_path_gives_bpp_near_one():
    # no homophones here: under p(pi|X) alone, "3 1" (3 = phone 2) would tie with "2 1"
    fst = fp.decoding_graph("S1-T1", 2, {1: [(1,)], 2: [(2, 1)]},
                            fp.unigram_fst({1: 0.5, 2: 0.5}, end=0.5))
    # tokens: 0 blank, 1 phone 1, 2 phone 2; plant "2 1" = word 2 at frames 1 and 3
    planted = [0, 2, 0, 1, 0, 0]
    logp = np.full((6, 3), math.log(1e-6))
    logp[np.arange(6), planted] = math.log(1 - 2e-6)
    lat = L.generate(L.DecodingGraph.from_fst(fst), logp, EVERYTHING_UNIQUE)
    props = M.path_proportions(lat)
    assert props.hypothesis == (2,)
    assert lat.best_path().tokens == tuple(planted)
    assert props.bpp > 0.999 and props.bhp > 0.999
    # and a flat emission spreads W*'s mass over its many alignments
    one_word = fp.fst_from_text("0 1 1 1 0.7\n0 1 2 2 0.6\n1")
    fst = fp.decoding_graph("S1-T1", 2, {1: [(1,)], 2: [(2, 1)]}, one_word)
    flat = L.generate(L.DecodingGraph.from_fst(fst), np.full((6, 3), -math.log(3)),
                      EVERYTHING_UNIQUE)
    props = M.path_proportions(flat)
    # every alignment scores (1/3)^6: W* is the cheaper word, BPP = 1 / its alignments
    assert props.hypothesis == (2,)
    paths = fp.enumerate_paths(fst, np.full((6, 3), -math.log(3)))
    n_align = sum(p.words == (2,) for p in paths)
    assert props.bpp == pytest.approx(1 / n_align) and props.bpp < 0.2


def test_empty_lattice_and_missing_hypothesis_name_the_utterance():
    # S2-T2 needs 2 frames per phone: word 2 ("2 1") cannot fit in 3 frames, word 1 can.
    # exactly one word 2 ("2 1")
    fst = fp.decoding_graph("S2-T2", 2, {2: [(2, 1)]}, fp.fst_from_text("0 1 2 2\n1"))
    graph = L.DecodingGraph.from_fst(fst)
    with pytest.raises(DataError, match="utt-7.*empty"):
        L.generate(graph, emission(3, 5, 0), EVERYTHING, utt="utt-7")
    lat = L.generate(graph, emission(5, 5, 0), EVERYTHING, utt="utt-8")
    with pytest.raises(DataError, match="utt-8.*no path"):
        M.path_proportions(lat, hypothesis=[2, 2])
    with pytest.raises(DataError, match="utt-9"):
        L.generate(graph, emission(5, 3, 0), EVERYTHING, utt="utt-9")  # too few columns
    bad = emission(5, 5, 0)
    bad[2, 1] = np.nan
    with pytest.raises(DataError, match="utt-10.*NaN"):
        L.generate(graph, bad, EVERYTHING, utt="utt-10")
    empty = L.Lattice("utt-11", 0, np.zeros(1, np.int64), *(np.zeros(0, np.int64),) * 4,
                      np.zeros(0), np.zeros(0), np.zeros(1))
    with pytest.raises(DataError, match="utt-11.*empty"):
        M.path_proportions(empty)
    with pytest.raises(DataError, match="utt-11.*empty"):
        M.fullsum_best(empty)


def test_search_beam_and_max_active_prune_but_keep_the_best_path():
    fst = fp.decoding_graph("S1-T1", 2, LEXICON, grammar("bigram"))
    graph = L.DecodingGraph.from_fst(fst)
    logp = emission(6, 3, 5)
    full = L.generate(graph, logp, EVERYTHING)
    for cfg in (L.LatticeConfig(beam=3.0, max_active=0, lattice_beam=1e9, unique_paths=False),
                L.LatticeConfig(beam=1e9, max_active=2, lattice_beam=1e9, unique_paths=False)):
        lat = L.generate(graph, logp, cfg)
        assert lat.num_arcs < full.num_arcs
        assert set(map(key, fp.lattice_paths(lat))) < set(map(key, fp.lattice_paths(full)))
    lat = L.generate(graph, logp, L.LatticeConfig(beam=3.0, max_active=0, lattice_beam=1e9))
    assert lat.best_path().words == full.best_path().words


def test_unique_paths_stop_at_their_state_bound_with_the_utterance_named(case):
    # A wide lattice beam (the paper's 32) on a large graph would split states by millions of
    # word histories; the split is bounded and says so instead of exhausting memory.
    _, graph, logp, paths = case
    lat = L.generate(graph, logp, L.LatticeConfig(beam=1e9, max_active=0, lattice_beam=32.0,
                                                  unique_paths=False), utt="utt-32")
    bounded = L.unique_paths(lat, max_states=lat.num_states * 50)
    assert bounded.num_arcs > 0
    with pytest.raises(DataError, match=r"utt-32.*more than 3 \(state, word history\)"):
        L.unique_paths(lat, max_states=3)


def test_the_compiled_reader_of_fst_text_gives_pythons_numbers():
    """Bit for bit what Python reads: tabs or spaces, weights or none, signs, exponents,
    infinities, digits past float precision (read by Python), 6-digit weights of every size
    as OpenFst prints them, blank lines; text it cannot read still gets Python's error."""
    rng = np.random.default_rng(0)
    weights = [f"{w:.6g}" for w in rng.lognormal(0, 4, 2000) * rng.choice([-1, 1], 2000)]
    lines = [f"{i}\t{i + 1}\t{i % 7}\t{i % 5}\t{w}" for i, w in enumerate(weights)]
    text = "\n".join(lines + ["", "3 4 5 6", "7 8 9 1 Infinity", "9 1 1 1 -inf", "2 1 1 1 .5",
                              "4 1 1 1 7.", "5 1 1 1 1.23456789012345678", "6 1 1 1 1e-30",
                              "7 1 1 1 -0", "12", "13 2.5e+2", "12 0.25"]) + "\n"
    for t in (text, "", "5", "0 1 2 3 0.7\n1"):
        got, want = L.fst_lines(t), L.python_fst_lines(t)
        for g, w in zip(got, want):
            assert g.shape == w.shape and np.array_equal(g, w) and \
                np.array_equal(np.signbit(g), np.signbit(w))
    graph = L.DecodingGraph.from_text(text)
    assert graph.final[12] == 0.25 and graph.final[13] == 250.0  # a state's last line counts
    with pytest.raises(ValueError):
        L.DecodingGraph.from_text("0 1 x 2\n")
