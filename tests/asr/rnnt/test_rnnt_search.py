"""RNN-T search: planted scorers with known answers, decoders batched together as searched
alone, greedy == beam(1), per-language softmax."""

import math
import random

import pytest
import torch

from speechlab.asr.rnnt import SearchConfig, build
from speechlab.asr.rnnt.search import TransducerSearch, best, decode
from speechlab.errors import ConfigError

VOCAB = {"en": 7, "hi": 5, "ta": 6}


class PlantedScorer:
    """A fake joiner+predictor: P(label | frame t, prefix) is a planted table per decoder.

    The search sees the same interface as ``TransducerScorer``; a prediction "row" is just an
    index into the prefixes seen, and the "encoder frame" of each decoder is just t.
    """

    blank = 0

    def __init__(self, vocab_size, table=None, seed=0, vocab_sizes=None):
        self.vocab_sizes = tuple(vocab_sizes or (vocab_size,))
        self.table = table or {}
        self.seed = seed
        self.prefixes = []  # row -> (decoder, prefix)

    def dist(self, t, prefix, decoder=0):
        if (t, prefix) in self.table:
            return self.table[(t, prefix)]
        rng = random.Random(hash((self.seed, decoder, t, prefix)))
        w = [rng.random() + 0.05 for _ in range(self.vocab_sizes[decoder])]
        return [x / sum(w) for x in w]

    def start(self):
        self.prefixes += [(d, ()) for d in range(len(self.vocab_sizes))]
        return list(range(len(self.prefixes) - len(self.vocab_sizes), len(self.prefixes)))

    def extend(self, rows, tokens, decoders, frames):
        for row, token, d in zip(rows, tokens, decoders):
            dec, prefix = self.prefixes[row]
            assert dec == d
            self.prefixes.append((d, prefix + (token,)))
        new = list(range(len(self.prefixes) - len(rows), len(self.prefixes)))
        return new, self.log_probs(frames, new, decoders)

    def log_probs_array(self, frames, rows, decoders):
        return self.log_probs(torch.from_numpy(frames), rows, decoders).numpy()

    def log_probs(self, frames, rows, decoders):
        out = torch.full((len(rows), max(self.vocab_sizes)), -math.inf, dtype=torch.float64)
        for i, (row, d) in enumerate(zip(rows, decoders)):
            dec, prefix = self.prefixes[row]
            assert dec == d
            dist = self.dist(int(frames[d, 0]), prefix, d)
            out[i, : len(dist)] = torch.tensor([math.log(p) for p in dist], dtype=torch.float64)
        return out


def frames(T):
    return torch.arange(T, dtype=torch.float64)[:, None]


def brute_force(scorer, T, max_symbols):
    """log P(labels) summed over every alignment with <= max_symbols labels per frame."""
    totals = {}

    def walk(t, prefix, emitted, logp):
        if t == T:
            totals[prefix] = math.log(math.exp(totals[prefix]) + math.exp(logp)) if prefix in totals else logp
            return
        d = scorer.dist(t, prefix)
        walk(t + 1, prefix, 0, logp + math.log(d[0]))
        if emitted < max_symbols:
            for v in range(1, scorer.vocab_sizes[0]):
                walk(t, prefix + (v,), emitted + 1, logp + math.log(d[v]))

    walk(0, (), 0, 0.0)
    return totals


def search(scorer, T, beam=4, max_symbols=2, running=None, kind=TransducerSearch):
    """Every decoder of ``scorer`` searched over frames 0..T-1 by a ``kind`` search; the
    beams."""
    s = kind(scorer, beam, max_symbols)
    beams = s.start()
    D = len(scorer.vocab_sizes)
    for t in range(T):
        beams = s.step(beams, torch.full((D, 1), float(t)), t,
                       None if running is None else running(t))
    return beams


@pytest.mark.parametrize("seed", range(3))
def test_unpruned_beam_gives_exact_label_sequence_probabilities(seed):
    scorer = PlantedScorer(3, seed=seed)
    T, S = 3, 2
    exact = brute_force(scorer, T, S)
    (final,) = search(scorer, T, beam=1000, max_symbols=S)  # > every sequence there is
    got = {h.tokens: h.score for h in final.values()}
    assert set(got) == set(exact)
    for seq, lp in exact.items():
        assert got[seq] == pytest.approx(lp, abs=1e-9)
    assert best(final).tokens == max(exact, key=exact.get)


def test_planted_case_beam_finds_best_sequence_greedy_misses():
    # Frame 0: "a" (1) is the single most likely label, but after "a" the model wants blank
    # only half the time and frame 1 is unsure; "b" (2) is followed by confident blanks.
    table = {
        (0, ()): [0.25, 0.40, 0.35],
        (0, (1,)): [0.5, 0.25, 0.25],
        (0, (2,)): [1.0 - 2e-9, 1e-9, 1e-9],
        (1, ()): [0.2, 0.4, 0.4],
        (1, (1,)): [0.5, 0.25, 0.25],
        (1, (2,)): [0.9, 0.05, 0.05],
    }
    scorer = PlantedScorer(3, table)
    exact = brute_force(scorer, 2, 1)
    best_seq = max(exact, key=exact.get)
    assert best_seq == (2,)
    assert best(search(scorer, 2, beam=1, max_symbols=1)[0]).tokens == (1,)  # greedy
    for width in (2, 3, 8):
        assert best(search(scorer, 2, beam=width, max_symbols=1)[0]).tokens == best_seq


@pytest.mark.parametrize("seed", range(4))
def test_decoders_searched_together_are_each_searched_alone(seed):
    """Batching decoders (different vocabularies, some switched off for a while) changes no
    decoder's beam."""
    sizes = (4, 6, 3)

    def running(t):
        return [True, t % 3 != 1, t < 4]

    for beam, S in ((1, 2), (3, 2), (5, 3)):
        together = search(PlantedScorer(0, seed=seed, vocab_sizes=sizes), 7, beam, S, running)
        for d in range(3):
            alone_scorer = PlantedScorer(0, seed=seed, vocab_sizes=sizes)
            only = search(alone_scorer, 7, beam, S,
                          lambda t, d=d: [running(t)[i] and i == d for i in range(3)])
            def view(beam):  # rows number prefixes per scorer: compare what they hold
                return [(h.tokens, h.score, h.times) for h in beam.values()]

            assert view(only[d]) == view(together[d])


@pytest.mark.parametrize("variant,lang", [("mono", None), ("vanilla", None), ("onehot", "ta"),
                                          ("multisoftmax_lsp", "en")])
def test_greedy_equals_beam_width_one_on_models(variant, lang):
    torch.manual_seed(3)
    model = build(variant, {"en": 7} if variant == "mono" else VOCAB, "tiny").eval()
    with torch.no_grad():  # sharpen the random joint so that labels get emitted at all
        for out in model.joiner.outputs:
            out.weight.mul_(8.0)
    x = torch.randn(2, 30, 8)
    x_lens = torch.tensor([30, 21])
    for S in (1, 3):
        g = decode(model, x, x_lens, lang, SearchConfig("greedy", 1, S))
        b = decode(model, x, x_lens, lang, SearchConfig("beam", 1, S))
        assert [h.tokens for h in g] == [h.tokens for h in b]
        assert any(len(h.tokens) for h in g)
        for hg, hb in zip(g, b):
            assert hg.score == pytest.approx(hb.score, abs=1e-5)
            assert hg.times == hb.times  # the same alignment, frame for frame
        # each label carries the encoder frame it was emitted on, in order, within the input,
        # and no frame holds more than S of them
        enc_lens = model.encode(x, x_lens, lang)[1]
        for h, n in zip(b, enc_lens.tolist()):
            assert len(h.times) == len(h.tokens)
            assert list(h.times) == sorted(h.times) and all(0 <= t < n for t in h.times)
            assert all(h.times.count(t) <= S for t in set(h.times))


def test_max_symbols_per_frame_bounds_emissions():
    # A scorer that hardly ever wants blank: greedy emits exactly max_symbols labels per frame.
    scorer = PlantedScorer(3, seed=0)
    scorer.dist = lambda t, prefix, decoder=0: [1e-6, 0.6, 0.4 - 1e-6]
    for S in (1, 2, 4):
        assert len(best(search(scorer, 5, beam=1, max_symbols=S)[0]).tokens) == 5 * S
        (final,) = search(scorer, 5, beam=6, max_symbols=S)
        assert max(len(h.tokens) for h in final.values()) <= 5 * S
    # Without pruning the bound is exact: the longest sequence has T * S labels (and the exact
    # test above shows no alignment with more than S labels on a frame is ever scored).
    (final,) = search(scorer, 3, beam=1000, max_symbols=2)
    assert max(len(h.tokens) for h in final.values()) == 6


def test_multisoftmax_never_emits_another_languages_symbol():
    torch.manual_seed(0)
    ms = build("multisoftmax", VOCAB, "tiny").eval()
    vanilla = build("vanilla", VOCAB, "tiny").eval()
    en_label = 3
    with torch.no_grad():
        # Make one English label overwhelming wherever it is available.
        ms.joiner.outputs[ms.languages.index("en")].bias[en_label] = 50.0
        vanilla.joiner.outputs[0].bias[vanilla.union.to_union("en", [en_label])[0]] = 50.0
    x = torch.randn(1, 20, 8)
    x_lens = torch.tensor([20])
    cfg = SearchConfig("beam", 3, 2)
    # The vanilla model, even told the audio is Hindi, emits the English symbol.
    (hv,) = decode(vanilla, x, x_lens, "hi", cfg)
    assert vanilla.union.language_of(hv.tokens) == "en"
    # The multi-softmax model decodes with Hindi's softmax only: local ids < V_hi, all Hindi.
    (en,) = decode(ms, x, x_lens, "en", cfg)
    assert set(en.tokens) == {en_label}
    for lang in ("hi", "ta"):
        (h,) = decode(ms, x, x_lens, lang, cfg)
        assert all(1 <= tok < VOCAB[lang] for tok in h.tokens)
        union_ids = ms.union.to_union(lang, h.tokens)
        assert all(ms.union.to_local(u)[0] == lang for u in union_ids)


def test_unknown_method_is_a_config_error():
    model = build("mono", {"en": 5}, "tiny")
    with pytest.raises(ConfigError, match="unknown search method"):
        decode(model, torch.zeros(1, 4, 8), torch.tensor([4]), None, SearchConfig("viterbi"))


def test_the_config_lists_exactly_the_searches_there_are():
    from speechlab.asr.rnnt.config import SEARCH_METHODS
    from speechlab.asr.rnnt.search import SEARCHES

    assert tuple(SEARCHES) == SEARCH_METHODS
    for method in SEARCH_METHODS:
        assert SearchConfig(method).method == method


def test_label_sequences_are_interned_and_compaction_keeps_what_is_in_use():
    from speechlab.asr.rnnt.search import Hyp, Sequences

    seqs = Sequences()
    a = seqs.child(seqs.child(0, 3), 5)
    assert seqs.child(seqs.child(0, 3), 5) == a  # the same sequence, the same id
    b = seqs.child(seqs.child(0, 4), 5)
    assert b != a and seqs.labels(a) == (3, 5) and seqs.labels(b) == (4, 5)
    assert seqs.labels(0) == () and seqs.last_label(a) == 5
    n = seqs.emitted(seqs.emitted(0, 2), 2)
    assert seqs.times(n) == (2, 2) and seqs.times(0) == ()
    old = Hyp(a, -1.5, n, 7, seqs)
    for i in range(100):  # entries nobody keeps
        seqs.child(i, 9)
    new, id_of, node_of = seqs.kept([a], [n])
    assert new.labels(id_of[a]) == (3, 5) and new.times(node_of[n]) == (2, 2)
    assert b not in id_of and len(new._parent) == 3  # the empty sequence, (3,), (3, 5)
    assert old.tokens == (3, 5) and old.times == (2, 2)  # read from the table it was made in
    assert new.child(new.child(0, 3), 5) == id_of[a]  # still interned after compaction
