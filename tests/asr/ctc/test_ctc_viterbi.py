"""Viterbi decoding (eq. 8) against brute-force enumeration of every path through S_dec, and on
planted answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speechlab.asr.ctc import graphs, topology
from speechlab.asr.ctc.decode import (
    ViterbiConfig,
    ViterbiDecoder,
    acoustic_matrix,
    decode_batch,
    tune_acoustic_weight,
)
from speechlab.errors import ConfigError, DataError
from speechlab.testing.fst_paths import best_by_output, outputs_of, reference_viterbi
from speechlab.text.lexicon import Lexicon
from speechlab.text.ngram import NgramConfig, estimate

ALL = list(topology.TOPOLOGIES)
EXACT = ViterbiConfig(beam=1e4, max_active=100_000)  # no pruning on tiny graphs


@pytest.fixture(scope="module")
def lang(tiny_lexicon):
    return graphs.make_lang(tiny_lexicon)


@pytest.fixture(scope="module")
def G(tiny_arpa, lang):
    return graphs.grammar_fst(tiny_arpa, lang)


@pytest.mark.parametrize("name", ALL)
def test_decoder_finds_the_brute_force_best_path(name, lang, G, tiny_lm):
    rng = np.random.default_rng(3)
    built = [graphs.decoding_graph(name, lang, G, r) for r in graphs.RECIPES]
    for frames, alpha in ((4, 0.5), (6, 1.0), (5, 2.0)):
        log_probs = np.log(rng.dirichlet(np.full(built[0].num_tokens, 0.4), size=frames))
        reference = reference_viterbi(name, lang, tiny_lm, log_probs, alpha)
        best = max(reference.values())
        for graph in built:
            dec = ViterbiDecoder(graph.fst, graph.num_tokens,
                                 ViterbiConfig(beam=1e4, max_active=100_000,
                                               acoustic_weight=alpha))
            res = dec.decode(log_probs)
            paths = best_by_output(graph.fst, log_probs, alpha)  # every path through S_dec
            assert res.score == pytest.approx(max(paths.values()), abs=1e-3)
            assert res.score == pytest.approx(best, abs=5e-3), graph.recipe
            # the words are a best hypothesis (homophones "b"/"c" may tie)
            assert reference[res.words] == pytest.approx(best, abs=5e-3)
            # the alignment is a path of S_dec for those words, scored as reported
            assert res.reached_final and res.tokens.shape == (frames,)
            assert res.words in outputs_of(graph.fst, res.tokens.tolist())
            am = log_probs[np.arange(frames), res.tokens].sum()
            assert res.am_score == pytest.approx(am, abs=1e-4)
            assert res.score == pytest.approx(res.lm_score + alpha * res.am_score, abs=1e-4)


# A second world whose words parse uniquely, for planted answers.
PLANT_LEXICON = {"go": [["g", "o"]], "dog": [["d", "o", "g"]], "to": [["t", "u"]],
                 "do": [["d", "u"]], "got": [["g", "o", "t"]]}
PLANT_TEXT = [["go", "to"], ["do", "go"], ["go", "to", "dog"], ["got", "to", "go"]]


@pytest.fixture(scope="module")
def plant(tmp_path_factory):
    lang = graphs.make_lang(Lexicon(PLANT_LEXICON))
    arpa = tmp_path_factory.mktemp("plant") / "lm.arpa"
    estimate(PLANT_TEXT, NgramConfig(order=2)).write(arpa)
    return lang, graphs.grammar_fst(arpa, lang)


def planted(name: str, lang, words, confidence: float = 0.9, seed: int = 0):
    """An alignment of ``words`` (blank, each phone along its full chain, blank between words
    and at the end) and (T, V) log-probabilities that put ``confidence`` on it."""
    topo = topology.get(name)
    index = lang.word_index()
    tokens = [0]
    for w in words:
        (pron,) = [p for wid, p, _ in lang.prons if wid == index[w]]
        for p in pron:
            tokens += [topology.token(topo, p, s) for s in range(topo.states)]
        tokens.append(0)
    V = topology.num_tokens(name, lang.num_phones)
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(V), size=len(tokens)) * (1 - confidence)
    probs[np.arange(len(tokens)), tokens] += confidence
    return np.array(tokens), np.log(probs)


@pytest.mark.parametrize("name", ALL)
def test_planted_answer_with_paper_settings(name, plant):
    lang, G = plant
    graph = graphs.decoding_graph(name, lang, G)
    tokens, log_probs = planted(name, lang, ["dog", "to", "go"])
    res = ViterbiDecoder(graph.fst, graph.num_tokens).decode(log_probs)  # beam 32, 2000 active
    assert graph.words(res.words) == ["dog", "to", "go"]
    assert res.tokens.tolist() == tokens.tolist()


def test_batch_decoding_respects_lengths_and_takes_torch(plant):
    lang, G = plant
    graph = graphs.decoding_graph("S2-T1", lang, G)
    dec = ViterbiDecoder(graph.fst, graph.num_tokens)
    utts = [planted("S2-T1", lang, w, seed=i)[1]
            for i, w in enumerate([["go"], ["dog", "to", "go"], ["do", "go"]])]
    T = max(len(u) for u in utts)
    batch = np.full((len(utts), T, graph.num_tokens), 0.0)  # padding: log 1, must be ignored
    for b, u in enumerate(utts):
        batch[b, :len(u)] = u
    lengths = [len(u) for u in utts]
    for results in (decode_batch(dec, batch, lengths),
                    decode_batch(dec, torch.from_numpy(batch), torch.tensor(lengths))):
        assert [graph.words(r.words) for r in results] == [["go"], ["dog", "to", "go"],
                                                            ["do", "go"]]
        for r, u in zip(results, utts):
            alone = dec.decode(torch.from_numpy(u))
            assert r.score == alone.score and r.tokens.tolist() == alone.tokens.tolist()


def test_acoustic_weight_tuning_picks_the_weight_that_trusts_the_acoustics(plant):
    """With alpha tiny the LM alone decides and prefers its frequent sentence over the planted
    rare one; alpha 1 and 3 both decode it (the tie goes to the first)."""
    lang, G = plant
    graph = graphs.decoding_graph("S1-T1", lang, G)
    truth = [["do", "go", "to"], ["dog", "got"]]
    dev = [planted("S1-T1", lang, w, seed=i)[1] for i, w in enumerate(truth)]

    def error(results):
        return sum(graph.words(r.words) != t for r, t in zip(results, truth)) / len(truth)

    search = tune_acoustic_weight(graph.fst, graph.num_tokens, dev, error,
                                  weights=(0.001, 1.0, 3.0))
    assert search.errors[0.001] > 0 and search.errors[1.0] == search.errors[3.0] == 0
    assert search.best == 1.0
    with pytest.raises(ConfigError):
        tune_acoustic_weight(graph.fst, graph.num_tokens, dev, error, weights=())


def test_bad_inputs_and_settings(plant):
    lang, G = plant
    graph = graphs.decoding_graph("S1-T1", lang, G)
    dec = ViterbiDecoder(graph.fst, graph.num_tokens)
    with pytest.raises(DataError, match=r"do not fit a graph over \d+ tokens"):
        dec.decode(np.zeros((5, graph.num_tokens + 1)))
    with pytest.raises(DataError, match="T>=1"):
        dec.decode(np.zeros((0, graph.num_tokens)))
    with pytest.raises(DataError, match=r"must be \(T, V\)"):
        dec.decode(np.zeros(5))
    with pytest.raises(DataError, match="lengths"):
        decode_batch(dec, np.zeros((2, 5, graph.num_tokens)), [5])
    for bad in (dict(beam=0), dict(acoustic_weight=0), dict(min_active=10, max_active=5)):
        with pytest.raises(ConfigError):
            ViterbiConfig(**bad)
    x = acoustic_matrix(torch.ones(3, 4, dtype=torch.float64), 0.5)
    assert x.dtype == np.float32 and x.flags.c_contiguous and float(x[0, 0]) == 0.5


def test_config_maps_to_kaldi_options():
    opts = ViterbiConfig(beam=7.5, max_active=123, min_active=4, beam_delta=0.25).options()
    assert (opts.beam, opts.max_active, opts.min_active, opts.beam_delta) == (7.5, 123, 4, 0.25)
    default = ViterbiConfig().options()
    assert (default.beam, default.max_active) == (32.0, 2000)  # Section 3.2


@pytest.mark.parametrize("name, words", [("S1-T1", ["do", "go"]), ("S2-T1", ["go"]),
                                         ("S3-T2★", ["to"])])
def test_unpruned_settings_find_the_brute_force_best_path_of_a_planted_graph(name, words, plant):
    """EXACT, which the brute-force comparisons above rely on, prunes nothing on a tiny graph:
    on weakly planted log-probs (the planted words need not win) its result is the best of
    every complete path through S_dec, scored as that path scores."""
    lang, G = plant
    graph = graphs.decoding_graph(name, lang, G)
    for seed in range(3):
        _, log_probs = planted(name, lang, words, confidence=0.3, seed=seed)
        paths = best_by_output(graph.fst, log_probs)
        res = ViterbiDecoder(graph.fst, graph.num_tokens, EXACT).decode(log_probs)
        assert res.score == pytest.approx(max(paths.values()), abs=1e-3)
        assert paths[res.words] == pytest.approx(res.score, abs=1e-3)


def test_decode_topology_decodes_planted_utterances_and_measures_their_lattices(plant, tmp_path):
    """The decoding library on planted log-probs (the features of an identity "model"): the
    acoustic weight tuned on dev, the planted words from Viterbi and from both prefix
    searches, and a lattice measured for every test utterance."""
    from speechlab.asr.ctc.phones import PhoneTokenizer
    from speechlab.papers.topologies.decoding import GraphDecodingConfig, decode_topology
    from speechlab.asr.data import Utterance

    lang, G = plant
    arpa = tmp_path / "lm.arpa"
    estimate(PLANT_TEXT, NgramConfig(order=2)).write(arpa)
    graph = graphs.decoding_graph("S1-T1", lang, G)

    def utt(i: int, words: list[str]) -> Utterance:
        feats = torch.from_numpy(planted("S1-T1", lang, words, seed=i)[1]).float()
        return Utterance(f"u{i}", "en", feats, " ".join(words), None)

    test = [utt(i, w) for i, w in enumerate([["dog", "to", "go"], ["go"], ["do", "go"]])]
    dev = [utt(9, ["got", "to", "go"])]
    result = decode_topology(lambda x, x_lens: (x, x_lens), graph, test, dev,
                             GraphDecodingConfig(acoustic_weights=(1.0, 2.0)),
                             prefix_lexicon=PhoneTokenizer(Lexicon(PLANT_LEXICON), "en"),
                             arpa=arpa)
    assert result.hyps == {u.id: u.text for u in test}
    assert result.dev_wer[1.0] == 0 and result.acoustic_weight == 1.0  # ties go to the first
    assert not result.failed and set(result.bpp) == set(result.bhp) == set(result.hyps)
    assert all(0 < v <= 1 for v in [*result.bpp.values(), *result.bhp.values()])
    assert all(result.agrees.values())
    assert result.prefix == {"lexicon": result.hyps, "lexicon+LM": result.hyps}
    # without a lexicon and an LM, no prefix search
    assert decode_topology(lambda x, x_lens: (x, x_lens), graph, test, dev,
                           GraphDecodingConfig()).prefix == {}
