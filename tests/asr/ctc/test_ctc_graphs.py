"""L, G, S_dec (eq. 7) and S_trn (eq. 4) on a tiny world, against brute-force enumerations that
do not use the composed graphs: the topology's own arrays, the lexicon, the ARPA file."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from speechlab.asr.ctc import graphs, topology
from speechlab.errors import ConfigError, DataError
from speechlab.testing.fst_paths import accepted_sequences, best_by_output, parses, \
    reference_viterbi
from speechlab.text.lexicon import Lexicon

ALL = list(topology.TOPOLOGIES)


@pytest.fixture(scope="module")
def lang(tiny_lexicon):
    return graphs.make_lang(tiny_lexicon)


@pytest.fixture(scope="module")
def G(tiny_arpa, lang):
    return graphs.grammar_fst(tiny_arpa, lang)


def test_lang_numbers_symbols_and_adds_disambiguation(lang):
    assert lang.phones == ("x", "y", "z") and lang.words == ("a", "ab", "b", "c", "d")
    # "a" (x) is a prefix of "ab"; "b" and "c" share (y); "d" has two pronunciations
    assert lang.prons == ((1, (1,), 1), (2, (1, 2), 0), (3, (2,), 1), (4, (2,), 2),
                          (5, (3, 1), 0), (5, (3, 2), 0))
    assert lang.num_disambig == 3  # #0 (back-off), #1, #2
    assert lang.phone_table().splitlines()[-3:] == ["#0 4", "#1 5", "#2 6"]
    assert lang.word_table().splitlines()[-3:] == ["#0 6", "<s> 7", "</s> 8"]


def test_phone_order_follows_the_given_inventory(tiny_lexicon):
    lang = graphs.make_lang(tiny_lexicon, phones=["z", "y", "x", "w"])
    assert lang.num_phones == 4 and lang.prons[0] == (1, (3,), 1)


def test_phone_missing_from_the_inventory_is_named(tiny_lexicon):
    with pytest.raises(DataError, match="word 'd' uses phone 'z'"):
        graphs.make_lang(tiny_lexicon, phones=["x", "y"])


def test_lexicon_fst_maps_pronunciations_to_words(lang):
    plain = graphs.lexicon_fst(lang, disambig=False)
    with_disambig = graphs.lexicon_fst(lang, disambig=True)
    for word, pron, k in lang.prons:
        # accepted_sequences reads input labels as "token + 1": phone p shows as p - 1
        assert (tuple(p - 1 for p in pron), (word,)) in accepted_sequences(plain, len(pron))
        labels = pron + ((lang.phone_disambig(k),) if k else ())
        assert (tuple(p - 1 for p in labels), (word,)) in \
            accepted_sequences(with_disambig, len(labels))
    # the #0 self-loop passes the grammar's back-off label through
    hash0 = lang.phone_disambig(0) - 1
    assert ((hash0,), (lang.word_disambig,)) in accepted_sequences(with_disambig, 1)
    # with disambiguation symbols, no phone string has two words
    two = accepted_sequences(with_disambig, 2)
    assert len({t for t, _ in two}) == len(two)


def test_word_ids_skip_or_fail_naming_the_word(lang):
    assert graphs.word_ids(["a", "zz", "d", "zz"], lang, "skip") == ([1, 5], ["zz", "zz"])
    with pytest.raises(DataError, match="word 'zz' is not in the lexicon"):
        graphs.word_ids(["a", "zz"], lang)
    with pytest.raises(ConfigError):
        graphs.word_ids(["a"], lang, "ignore")


def test_grammar_words_without_pronunciation(tiny_arpa, caplog):
    small = graphs.make_lang(Lexicon({"a": [["x"]], "b": [["y"]]}))
    with pytest.raises(DataError, match=r"3 LM word\(s\) have no pronunciation.*'ab'"):
        graphs.grammar_fst(tiny_arpa, small, missing="error")
    with caplog.at_level(logging.WARNING):
        g = graphs.grammar_fst(tiny_arpa, small, missing="skip")
    assert "skipping 3 of 5 LM words" in caplog.text
    assert g.num_states > 0


def _token_phone_sequences(name: str, num_phones: int, num_frames: int):
    """Every (tokens, phones) the topology's arrays accept in exactly num_frames frames."""
    g = topology.arcs(name, num_phones)
    out = set()

    def walk(s, tokens, phones):
        if len(tokens) == num_frames:
            if g.final[s]:
                out.add((tokens, phones))
            return
        for a in np.flatnonzero(g.src == s):
            lab = int(g.label[a])
            walk(int(g.dst[a]), tokens + (int(g.token[a]),), phones + ((lab,) if lab else ()))

    walk(g.start, (), ())
    return out


@pytest.mark.parametrize("name", ALL)
def test_training_graph_accepts_exactly_the_alignments_of_the_transcript(name, lang):
    compile_ = graphs.TrainingGraphCompiler(name, lang)
    words = ["d", "a"]  # z x x (needs a blank between the x's under CTC) or z y x
    fst, skipped = compile_(words)
    assert skipped == []
    ids = tuple(graphs.word_ids(words, lang)[0])
    found = 0
    for frames in (3, 5, 7):
        expected = {tokens for tokens, phones in _token_phone_sequences(name, 3, frames)
                    if ids in parses(phones, lang.prons)}
        got = accepted_sequences(fst, frames)
        assert {t for t, _ in got} == expected, frames
        assert all(out == ids for _, out in got)
        found += len(expected)
    assert found > 0
    arcs = graphs.to_arcs(fst)  # the array form a graph loss consumes
    assert arcs.num_states == fst.num_states and arcs.token.max() < compile_.num_tokens


def test_training_graph_checks_words_and_phones(lang):
    compile_ = graphs.TrainingGraphCompiler("S1-T1", lang, missing="skip")
    fst, skipped = compile_(["a", "zz"])
    assert skipped == ["zz"] and fst.num_states > 0
    with pytest.raises(DataError, match="'zz'"):
        graphs.TrainingGraphCompiler("S1-T1", lang)(["zz"])
    graphs.check_token_fst(topology.build("S2-T1", 3), lang)
    with pytest.raises(ConfigError, match="phone 'z' \\(id 3\\)"):
        graphs.check_token_fst(topology.build("S2-T1", 2), lang)


def test_is_functional_matches_brute_force():
    for name in ALL:
        ambiguous = False
        for frames in range(1, 6):
            seen: dict = {}
            for tokens, phones in _token_phone_sequences(name, 2, frames):
                if seen.setdefault(tokens, phones) != phones:
                    ambiguous = True
        assert graphs.is_functional(name) == (not ambiguous), name
    assert not graphs.is_functional("S2-T1*")


@pytest.mark.parametrize("name", ALL)
def test_every_recipe_scores_every_hypothesis_as_eq8(name, lang, G, tiny_lm):
    """Per word sequence, the best path of each graph (raw composition, det/min L o G,
    det/min T o L o G) scores what eq. (8) computed from scratch scores."""
    built = {r: graphs.decoding_graph(name, lang, G, r) for r in graphs.RECIPES}
    assert built["full"].recipe == ("full" if graphs.is_functional(name) else "lg")
    rng = np.random.default_rng(7)
    for graph in built.values():
        assert graph.num_tokens == topology.num_tokens(name, 3)
        top = max(a.ilabel for s in range(graph.fst.num_states)
                  for a in _arcs(graph.fst, s))
        assert top <= graph.num_tokens  # no disambiguation symbol left
    for _ in range(2):
        log_probs = np.log(rng.dirichlet(np.full(built["none"].num_tokens, 0.5), size=5))
        reference = reference_viterbi(name, lang, tiny_lm, log_probs, 0.7)
        assert reference  # some hypothesis fits in 5 frames
        for recipe, graph in built.items():
            got = best_by_output(graph.fst, log_probs, 0.7)
            assert set(got) == set(reference), recipe
            for words, score in reference.items():
                # minimization quantizes weights to 1/1024; G stores float32
                assert got[words] == pytest.approx(score, abs=5e-3), (recipe, words)


def _arcs(fst, s):
    import kaldifst

    return list(kaldifst.ArcIterator(fst, s))


def test_full_recipe_is_deterministic_before_disambiguation_removal(lang, G):
    """After T' o LG is determinized, distinct arcs out of a state carry distinct tokens or
    are epsilons that were disambiguation symbols."""
    graph = graphs.decoding_graph("S3-T2", lang, G, "full")
    for s in range(graph.fst.num_states):
        labels = [a.ilabel for a in _arcs(graph.fst, s) if a.ilabel]
        assert len(labels) == len(set(labels)), s


def test_unknown_recipe(lang, G):
    with pytest.raises(ConfigError, match="unknown graph recipe"):
        graphs.decoding_graph("S1-T1", lang, G, "best")


def test_graph_cache_builds_once_and_keys_on_content(tmp_path, tiny_lexicon, tiny_arpa,
                                                     tiny_lm, monkeypatch):
    lexicon = Lexicon({w: tiny_lexicon[w] for w in tiny_lexicon})  # a copy to extend
    lexicon.add("unused", ["z", "z"])  # not in the LM: left out of the graph's words
    first = graphs.cached_decoding_graph(tmp_path, "S2-T1*", lexicon, tiny_arpa)
    assert "unused" not in first.lang.words and first.recipe == "lg"
    assert len(list(tmp_path.glob("*.fst"))) == 1

    def no_rebuild(*args, **kwargs):
        raise AssertionError("rebuilt a cached graph")

    monkeypatch.setattr(graphs, "decoding_graph", no_rebuild)
    again = graphs.cached_decoding_graph(tmp_path, "S2-T1★", lexicon, tiny_arpa)
    assert again.fst.num_states == first.fst.num_states
    assert (again.num_tokens, again.recipe, again.topology) == \
        (first.num_tokens, first.recipe, first.topology)
    monkeypatch.undo()

    other = tmp_path / "other.arpa"
    tiny_lm.write(other)
    other.write_text(other.read_text().replace("\\end\\", "\\end\\\n"))  # same LM, new bytes
    graphs.cached_decoding_graph(tmp_path, "S2-T1*", lexicon, other)
    graphs.cached_decoding_graph(tmp_path, "S2-T1*", lexicon, tiny_arpa, recipe="none")
    assert len(list(tmp_path.glob("*.fst"))) == 3
    assert not list(tmp_path.glob("*.tmp"))



def test_unicode_words_and_ipa_phones(tmp_path):
    """Hindi words with espeak-style IPA phones go through kaldilm's symbol table intact."""
    from speechlab.asr.ctc.decode import ViterbiDecoder
    from speechlab.text.ngram import NgramConfig, estimate

    lex = Lexicon({"नमस्ते": [["n", "ə", "m", "ə", "s", "t", "eː"]],
                   "दुनिया": [["d", "ʊ", "n", "ɪ", "j", "aː"]]})
    arpa = tmp_path / "hi.arpa"
    estimate([["नमस्ते", "दुनिया"], ["दुनिया"]], NgramConfig(order=2, discount=0.5)).write(arpa)
    lang = graphs.make_lang(lex)
    graph = graphs.decoding_graph("S1-T1", lang, graphs.grammar_fst(arpa, lang))
    # plant "नमस्ते दुनिया" under CTC: blank, each phone once, blank between words
    index = {p: i for i, p in enumerate(lang.phones, 1)}
    tokens = [0] + [index[p] for p in lex["नमस्ते"][0]] + [0] + \
        [index[p] for p in lex["दुनिया"][0]] + [0]
    log_probs = np.full((len(tokens), graph.num_tokens), np.log(0.01))
    log_probs[np.arange(len(tokens)), tokens] = np.log(0.9)
    res = ViterbiDecoder(graph.fst, graph.num_tokens).decode(log_probs)
    assert graph.words(res.words) == ["नमस्ते", "दुनिया"]
