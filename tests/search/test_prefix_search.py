"""CTC prefix beam search against brute-force sums over every CTC alignment (V^T of them),
against the lattice full-sum on the matching T o L o G, and with a planted LM preference."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from speechlab.asr.ctc import lattice as L
from speechlab.asr.ctc import lattice_metrics as M
from speechlab.search.prefix import (
    END,
    LexiconTrie,
    PrefixBeamSearch,
    PrefixSearchConfig,
    UnigramLM,
    prefix_beam_search,
)
from speechlab.errors import ConfigError, DataError
from speechlab.search import Beam
from speechlab.testing import lattice_paths as fp

EXACT = PrefixSearchConfig(beam=100_000, token_min_logp=-math.inf, beam_prune_logp=-math.inf)
LEXICON = {"a": [(1,)], "b": [(2, 1)], "c": [(1, 2), (2,)], "d": [(3, 3)]}


def emission(num_frames: int, num_tokens: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.log(rng.dirichlet(np.ones(num_tokens) * 0.8, size=num_frames))


def collapse(pi) -> tuple[int, ...]:
    out, prev = [], None
    for t in pi:
        if t != 0 and t != prev:
            out.append(t)
        prev = t
    return tuple(out)


def label_sums(logp) -> dict[tuple[int, ...], float]:
    """log sum_pi p(pi|X) per collapsed label sequence, over all V^T alignments."""
    T, V = logp.shape
    sums: dict[tuple[int, ...], list[float]] = {}
    for pi in itertools.product(range(V), repeat=T):
        sums.setdefault(collapse(pi), []).append(sum(logp[t, k] for t, k in enumerate(pi)))
    return {k: fp.logsumexp(v) for k, v in sums.items()}


def segmentations(labels, lexicon):
    """Every word sequence whose pronunciations concatenate to ``labels``."""
    if not labels:
        yield ()
        return
    for word, prons in lexicon.items():
        for pron in prons:
            if tuple(labels[: len(pron)]) == tuple(pron):
                for rest in segmentations(labels[len(pron):], lexicon):
                    yield (word,) + rest


def word_sums(logp, lexicon, lm=None) -> dict[tuple, float]:
    per_labels = label_sums(logp)
    acc: dict[tuple, list[float]] = {}
    for labels, s in per_labels.items():
        for words in segmentations(labels, lexicon):
            acc.setdefault(words, []).append(s)
    out = {}
    for words, v in acc.items():
        lm_score = 0.0
        if lm is not None:
            lm_score = sum(lm.score(words[:i], w) for i, w in enumerate(words))
            lm_score += lm.score(words, END)
        out[words] = fp.logsumexp(v) + lm_score
    return out


@pytest.mark.parametrize("T,V,seed", [(5, 3, 0), (6, 3, 1), (4, 4, 2)])
def test_unpruned_search_equals_brute_force_sum_over_alignments(T, V, seed):
    logp = emission(T, V, seed)
    ref = label_sums(logp)
    res = prefix_beam_search(logp, EXACT)
    assert {r.tokens for r in res} == set(ref)
    for r in res:
        assert r.log_prob == pytest.approx(ref[r.tokens], abs=1e-10)
        assert r.score == pytest.approx(ref[r.tokens], abs=1e-10)
    assert res[0].tokens == max(ref, key=ref.get)
    # a beam of 32 (the benchmark's) still finds the full-sum best here
    assert prefix_beam_search(logp, PrefixSearchConfig(beam=32))[0].tokens == res[0].tokens


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lexicon_search_sums_every_alignment_of_every_pronunciation(seed):
    logp = emission(5, 4, seed)
    ref = word_sums(logp, LEXICON)
    res = prefix_beam_search(logp, EXACT, LexiconTrie.from_dict(LEXICON))
    assert {r.words for r in res} == set(ref)
    for r in res:
        assert r.log_prob == pytest.approx(ref[r.words], abs=1e-10)
        assert r.words in set(segmentations(r.tokens, LEXICON))  # labels spell the words


def test_lm_scores_match_brute_force_and_log10_lms_are_converted():
    logp = emission(5, 4, 3)
    probs = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4}
    lm = UnigramLM({w: math.log(p) for w, p in probs.items()}, end=math.log(0.5))
    ref = word_sums(logp, LEXICON, lm)
    trie = LexiconTrie.from_dict(LEXICON)
    res = prefix_beam_search(logp, EXACT, trie, lm)
    assert {r.words for r in res} == set(ref)
    for r in res:
        assert r.score == pytest.approx(ref[r.words], abs=1e-10)
    lm10 = UnigramLM({w: math.log10(p) for w, p in probs.items()}, end=math.log10(0.5))
    res10 = prefix_beam_search(logp, PrefixSearchConfig(**{**EXACT.__dict__, "lm_log10": True}),
                               trie, lm10)
    ref10 = {r.words: r.score for r in res10}
    assert set(ref10) == {r.words for r in res}
    np.testing.assert_allclose([ref10[r.words] for r in res], [r.score for r in res], atol=1e-10)


def test_equals_lattice_fullsum_on_the_same_t_l_g():
    """Eq. 9 two ways: prefix search with lexicon + unigram LM, and the exact full-sum over an
    unpruned lattice of T(S1-T1) o L o G with the same unigram."""
    lexicon = {1: [(1,)], 2: [(2, 1)], 3: [(1, 2), (2,)]}
    probs = {1: 0.3, 2: 0.3, 3: 0.4}
    fst = fp.decoding_graph("S1-T1", 2, lexicon, fp.unigram_fst(probs, end=0.5))
    logp = emission(6, 3, 4)
    lat = L.generate(L.DecodingGraph.from_fst(fst), logp,
                     L.LatticeConfig(beam=1e9, max_active=0, lattice_beam=1e9))
    nbest = M.fullsum_nbest(lat, n=1000, score="total")
    lm = UnigramLM({w: math.log(p) for w, p in probs.items()}, end=math.log(0.5))
    res = prefix_beam_search(logp, EXACT, LexiconTrie.from_dict(lexicon), lm)
    assert {r.words for r in res} == {w for w, _ in nbest}
    mine = {r.words: r.score for r in res}
    for words, s in nbest:
        assert mine[words] == pytest.approx(s, abs=1e-4)  # graph weights are float32


def test_planted_lm_preference_wins_only_with_the_lm():
    # tokens: 0 blank, 1..3 phones. Frames say phone 1 (word "a") a little more than phone 3
    # ("e"), blank around; an LM that likes "e" 100x more than "a" flips the decision.
    lexicon = {"a": [(1,)], "e": [(3,)]}
    logp = np.log(np.array([
        [0.90, 0.04, 0.02, 0.04],
        [0.10, 0.50, 0.02, 0.38],
        [0.90, 0.04, 0.02, 0.04],
    ]))
    trie = LexiconTrie.from_dict(lexicon)
    no_lm = prefix_beam_search(logp, PrefixSearchConfig(), trie)
    assert no_lm[0].words == ("a",)
    lm = UnigramLM({"a": math.log(0.01), "e": math.log(0.99)})
    with_lm = prefix_beam_search(logp, PrefixSearchConfig(), trie, lm)
    assert with_lm[0].words == ("e",)
    assert with_lm[0].lm_score == pytest.approx(math.log(0.99))
    # a zero LM weight gives the acoustic decision back
    zero = prefix_beam_search(logp, PrefixSearchConfig(lm_weight=0.0), trie, lm)
    assert zero[0].words == ("a",)


def test_pruning_keeps_a_planted_peaky_answer():
    rng = np.random.default_rng(0)
    T, V = 60, 6
    labels = rng.integers(0, V, size=T)
    logits = rng.normal(0, 1, (T, V))
    logits[np.arange(T), labels] += 8
    logp = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    res = prefix_beam_search(logp, PrefixSearchConfig(beam=8))
    assert res[0].tokens == collapse(labels.tolist())


def test_built_on_the_shared_beam_core_and_input_errors():
    search = PrefixBeamSearch(PrefixSearchConfig(beam=4))
    beam = search.step(search.start(), np.log(np.full(3, 1 / 3)))
    assert len(beam) == 3 and isinstance(beam.beam(), Beam)
    assert sorted(h.tokens for h in beam.beam()) == [(), (1,), (2,)]
    with pytest.raises(ConfigError, match="lexicon"):
        PrefixBeamSearch(lm=UnigramLM({}))
    with pytest.raises(ConfigError):
        PrefixSearchConfig(beam=0)
    with pytest.raises(DataError, match="NaN"):
        prefix_beam_search(np.array([[0.0, np.nan]]))
    with pytest.raises(DataError, match=r"\(T, V\)"):
        prefix_beam_search(np.zeros(4))
    with pytest.raises(DataError, match="empty pronunciation"):
        LexiconTrie.from_dict({"x": [()]})


def test_streaming_steps_equal_whole_utterance_decoding():
    logp = emission(8, 4, 9)
    lexicon = LexiconTrie.from_dict(LEXICON)
    lm = UnigramLM({"a": -1.0, "b": -2.0, "c": -0.5, "d": -1.5}, end=-0.3)
    cfg = PrefixSearchConfig(beam=6)
    search = PrefixBeamSearch(cfg, lexicon, lm)
    fr = search.start()
    for t in range(logp.shape[0]):
        fr = search.step(fr, logp[t])
        assert len(fr) <= 6
    streamed = search.finish(fr)
    whole = prefix_beam_search(logp, cfg, lexicon, lm)
    assert [(r.words, r.tokens) for r in streamed] == [(r.words, r.tokens) for r in whole]
    np.testing.assert_allclose([r.score for r in streamed], [r.score for r in whole])
    # the frontier as core hypotheses: the words so far spell a prefix of the labels
    for h in fr.beam():
        words = h.state[2]
        assert any(words in set(segmentations(h.tokens[:n], LEXICON))
                   for n in range(len(h.tokens) + 1))
