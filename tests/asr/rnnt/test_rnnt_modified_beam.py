"""Modified beam search (a label consumes its frame, at most one a frame): exact when nothing is
pruned, greedy choices as the standard search's with one label a frame, decoders batched as
searched alone, the same hypotheses streamed and whole, on both backends, with hotwords."""

import math
import random

import numpy as np
import pytest
import torch

from speechlab.asr.rnnt import SearchConfig, build
from speechlab.asr.rnnt.search import (ModifiedBeamSearch, StreamingDecoder, TransducerSearch,
                                       _best_pairs, best, decode)

from test_rnnt_search import PlantedScorer
from test_rnnt_search import search as planted_search


class Planted(PlantedScorer):
    """The planted scorer with the prediction step alone that modified beam search asks for."""

    def predict(self, rows, tokens, decoders):
        for row, token, d in zip(rows, tokens, decoders):
            dec, prefix = self.prefixes[row]
            assert dec == d
            self.prefixes.append((d, prefix + (token,)))
        return list(range(len(self.prefixes) - len(rows), len(self.prefixes)))


def brute_force(scorer, T):
    """log P(labels) summed over every alignment in which each frame takes blank or one label."""
    totals = {}

    def walk(t, prefix, logp):
        if t == T:
            totals[prefix] = float(np.logaddexp(totals[prefix], logp)) if prefix in totals \
                else logp
            return
        d = scorer.dist(t, prefix)
        walk(t + 1, prefix, logp + math.log(d[0]))
        for v in range(1, scorer.vocab_sizes[0]):
            walk(t + 1, prefix + (v,), logp + math.log(d[v]))

    walk(0, (), 0.0)
    return totals


def search(scorer, T, beam=4, running=None):
    return planted_search(scorer, T, beam, 3, running, kind=ModifiedBeamSearch)


@pytest.mark.parametrize("seed", range(3))
def test_unpruned_it_gives_every_label_sequence_its_exact_probability(seed):
    scorer = Planted(3, seed=seed)
    exact = brute_force(scorer, 4)
    (final,) = search(scorer, 4, beam=1000)
    got = {h.tokens: h.score for h in final.values()}
    assert set(got) == set(exact)
    for seq, lp in exact.items():
        assert got[seq] == pytest.approx(lp, abs=1e-9)
    # each label on its own frame, in order
    for h in final.values():
        assert len(h.times) == len(h.tokens) == len(set(h.times))
        assert list(h.times) == sorted(h.times)


@pytest.mark.parametrize("kind", [TransducerSearch, ModifiedBeamSearch])
@pytest.mark.parametrize("hotwords", [False, True])
def test_each_label_keeps_its_probability_where_it_was_emitted(kind, hotwords):
    # what a word's confidence reads (speechlab.confidence.label_confidence): the joint's own
    # probability of each label at its frame, after the labels before it; a hotword's bonus
    # changes the search, not what the labels' probabilities were
    from speechlab.search.context import ContextGraph

    scorer = Planted(4, seed=5)
    s = kind(scorer, 6, 2)
    if hotwords:
        s.bias(0, ContextGraph([[1, 2], [3]], 2.0))
    beams = s.start()
    for t in range(4):
        beams = s.step(beams, torch.full((1, 1), float(t)), t, None)
    hyps = [h for h in beams[0].values() if h.tokens]
    assert hyps
    for h in hyps:
        want = [math.log(scorer.dist(t, h.tokens[:k])[v])
                for k, (t, v) in enumerate(zip(h.times, h.tokens))]
        assert h.label_log_probs == pytest.approx(want, abs=1e-12)


def test_a_beam_finds_what_greedy_misses():
    # Frame 0: label 1 is likeliest, but what follows it is uncertain; label 2 is followed by
    # confident blanks.
    table = {(0, ()): [0.25, 0.40, 0.35], (1, (1,)): [0.4, 0.3, 0.3],
             (1, (2,)): [0.98, 0.01, 0.01], (1, ()): [0.5, 0.25, 0.25]}
    scorer = Planted(3, table)
    exact = brute_force(scorer, 2)
    assert max(exact, key=exact.get) == (2,)
    assert best(search(Planted(3, table), 2, beam=1)[0]).tokens == (1,)
    for width in (2, 4):
        assert best(search(Planted(3, table), 2, beam=width)[0]).tokens == (2,)


@pytest.mark.parametrize("seed", range(3))
def test_decoders_searched_together_are_each_searched_alone(seed):
    sizes = (4, 6, 3)

    def running(t):
        return [True, t % 3 != 1, t < 4]

    for beam in (1, 3, 5):
        together = search(Planted(0, seed=seed, vocab_sizes=sizes), 7, beam, running)
        for d in range(3):
            alone = search(Planted(0, seed=seed, vocab_sizes=sizes), 7, beam,
                           lambda t, d=d: [running(t)[i] and i == d for i in range(3)])
            assert [(h.tokens, h.score, h.times) for h in alone[d].values()] == \
                [(h.tokens, h.score, h.times) for h in together[d].values()]


def _sharp(variant, vocab):
    torch.manual_seed(3)
    model = build(variant, vocab, "tiny").eval()
    with torch.no_grad():  # sharpen the random joint so that labels get emitted at all
        for out in model.joiner.outputs:
            out.weight.mul_(8.0)
    return model


@pytest.mark.parametrize("variant,lang", [("mono", None), ("onehot", "ta"),
                                          ("multisoftmax_lsp", "en")])
def test_greedy_makes_the_choices_of_the_standard_search_with_one_label_a_frame(variant, lang):
    model = _sharp(variant, {"en": 7} if variant == "mono" else {"en": 7, "hi": 5, "ta": 6})
    x, x_lens = torch.randn(2, 30, 8), torch.tensor([30, 21])
    mod = decode(model, x, x_lens, lang, SearchConfig("modified_beam", 1, 3))
    std = decode(model, x, x_lens, lang, SearchConfig("greedy", 1, 1))
    assert any(len(h.tokens) for h in mod)
    assert [(h.tokens, h.times) for h in mod] == [(h.tokens, h.times) for h in std]
    # a beam never does worse than greedy by its own score
    wide = decode(model, x, x_lens, lang, SearchConfig("modified_beam", 4, 3))
    assert all(w.score >= g.score - 1e-6 for w, g in zip(wide, mod))


def test_streamed_in_any_chunks_it_gives_the_whole_utterance_result():
    model = _sharp("mono", {"en": 7})
    cfg = SearchConfig("modified_beam", 3, 3)
    x = torch.randn(1, 47, 8, generator=torch.Generator().manual_seed(1))
    (full,) = decode(model, x, torch.tensor([47]), None, cfg)
    assert full.tokens
    rng = random.Random(7)
    for _ in range(3):
        dec = StreamingDecoder(model, None, cfg)
        at = 0
        while at < 47:
            n = rng.randint(1, 9)
            dec.accept(x[0, at:at + n])
            at += n
        assert (dec.result().tokens, dec.result().times) == (full.tokens, full.times)
        assert dec.result().score == pytest.approx(full.score, abs=1e-4)


@pytest.mark.parametrize("languages,language", [(("en",), "en"), (("en", "hi"), None)])
def test_the_onnx_backend_and_hotwords_search_as_the_torch_backend(languages, language):
    from speechlab.testing.rnnt import same_words, untrained_recognizer

    rec = untrained_recognizer("multisoftmax_lid", languages, sharpen=4.0)
    rng = np.random.default_rng(0)
    audio = (0.1 * rng.standard_normal(32000)).astype(np.float32)
    onnx = rec.onnx()
    want = rec.transcribe(audio, language=language, method="modified_beam", beam=4, nbest=3)
    got = onnx.transcribe(audio, language=language, method="modified_beam", beam=4, nbest=3)
    assert want.words
    assert (got.text, got.language) == (want.text, want.language)
    same_words(got, want)
    assert [t for t, _ in got.nbest] == [t for t, _ in want.nbest]
    # posteriors of float32 networks: the same to rounding
    assert [p for _, p in got.nbest] == pytest.approx([p for _, p in want.nbest], abs=1e-3)
    if language:  # a hotword the plain search misses is found (the standard search's test)
        assert "hello" not in want.text.split()
        biased = rec.transcribe(audio, language=language, method="modified_beam",
                                hotwords=["hello"], hotword_score=6.0)
        assert "hello" in biased.text.split()


def test_the_best_pairs_are_those_of_a_stable_sort():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n, V = int(rng.integers(1, 5)), int(rng.integers(2, 9))
        lp = rng.standard_normal((n, V + 2)).astype(np.float32)
        lp[rng.random((n, V + 2)) < 0.2] = -np.inf
        lp[:, rng.integers(0, V)] = 0.5  # ties
        scores = np.round(rng.standard_normal(n), 1)
        k = int(rng.integers(1, 2 * n * V))
        pos, val = _best_pairs(lp, scores, V, k)
        totals = (scores[:, None] + lp[:, :V].astype(np.float64)).ravel()
        want = sorted(range(n * V), key=lambda j: -totals[j])[:k]  # stable: ties by position
        assert pos.tolist() == want
        assert val.tolist() == totals[want].tolist()


def test_each_rows_best_labels_are_those_of_a_stable_sort():
    from speechlab.asr.rnnt.search import _row_best

    rng = np.random.default_rng(1)
    for _ in range(200):
        n, V = int(rng.integers(1, 6)), int(rng.integers(2, 12))
        lp = rng.standard_normal((n, V)).astype(np.float32)
        lp[rng.random((n, V)) < 0.2] = -np.inf
        lp[:, rng.integers(0, V)] = 0.25  # ties
        k = int(rng.integers(1, V + 1))
        vals, cols = _row_best(lp, k)
        for i in range(n):
            want = sorted(range(V), key=lambda v: -lp[i, v])[:k]
            assert cols[i].tolist() == want
            assert vals[i].tolist() == lp[i, want].tolist()
