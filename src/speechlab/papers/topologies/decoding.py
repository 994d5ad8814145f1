"""Decoding sets of utterances with a trained CTC-like acoustic model over a decoding graph
``S_dec = T∘L∘G`` (eq. 7 of the CTC-topologies paper), and measuring its lattices.

- :func:`log_probs_of`: the model's (T', V) log-probabilities per utterance.
- :func:`tune_on_dev`: the acoustic weight of eq. 8 that gives the lowest dev WER
  (Section 3.2).
- :func:`viterbi_with_lattices`: Viterbi decoding (eq. 8) and, per utterance, its lattice's
  BPP and BHP (eqs. 10-11) and whether full-sum decoding over the lattice (eq. 9) agrees.
- :func:`prefix_search_texts`: full-sum decoding of plain CTC by prefix beam search (eq. 9)
  over a lexicon, without and with an n-gram LM.
- :func:`decode_topology`: all of it for one model: tune on dev, decode the test set.

Everything takes a model, a graph (:func:`speechlab.asr.ctc.graphs.cached_decoding_graph`),
utterances and plain settings; nothing here knows a run directory or a recipe.

Shapes: T' output frames, V tokens (network outputs).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from speechlab.asr.ctc.decode import (
    AcousticWeightSearch,
    ViterbiConfig,
    ViterbiDecoder,
    ViterbiResult,
    tune_acoustic_weight,
)
from speechlab.asr.ctc.graphs import DecodingGraph
from speechlab.asr.ctc.phones import PhoneTokenizer
from speechlab.asr.data import Utterance
from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError, DataError

#: The two prefix searches of :func:`prefix_search_texts`: lexicon alone, lexicon and LM.
PREFIX_SEARCHES = ("lexicon", "lexicon+LM")


@dataclass(frozen=True)
class GraphDecodingConfig:
    """How a test set is decoded over ``S_dec`` (Section 3.2 for the defaults).

    ``beam``, ``max_active``: the Viterbi search's and the lattices' (:class:`ViterbiConfig`);
    ``lattice_beam``: see :class:`speechlab.asr.ctc.lattice.LatticeConfig` (8, as the paper's
    analysis script; Sec. 3.3 says 32, which makes lattices of one path per word sequence
    explode); ``acoustic_weights``: the alphas of eq. 8 tried on the dev set (ties go to the
    first); ``prefix_beam``: the beam of the prefix searches (eq. 9, plain CTC only).

    The topologies recipe (:class:`~.recipe.TopologiesConfig`) extends this config, so these
    settings are top-level keys of its YAML.
    """

    beam: float = ranged(32.0, gt=0)
    max_active: int = ranged(2000, ge=1)
    lattice_beam: float = ranged(8.0, ge=0)
    acoustic_weights: tuple[float, ...] = ranged((0.5, 0.7, 1.0, 1.5, 2.0), gt=0)
    prefix_beam: int = ranged(32, ge=1)

    def __post_init__(self) -> None:
        check_fields(self)
        # Each weight is tried on dev after a model is trained: an empty list would fail only
        # then.
        if not self.acoustic_weights:
            raise ConfigError("acoustic_weights: give at least one weight, e.g. [1.0]")

    def viterbi(self, acoustic_weight: float = 1.0) -> ViterbiConfig:
        return ViterbiConfig(beam=self.beam, max_active=self.max_active,
                             acoustic_weight=acoustic_weight)


@dataclass
class TopologyDecoding:
    """One model's test decoding: Viterbi hypotheses, the acoustic weight tuned on dev (and
    the dev WER of every weight tried), per utterance BPP, BHP and whether full-sum decoding
    over the lattice agrees, the lattices that could not be measured (utterance id -> why),
    and the CPU seconds taken."""

    hyps: dict[str, str]
    acoustic_weight: float
    dev_wer: dict[float, float]
    bpp: dict[str, float]
    bhp: dict[str, float]
    agrees: dict[str, bool]
    failed: dict[str, str]
    seconds: float
    # Plain CTC only: prefix-search hypotheses per search (:data:`PREFIX_SEARCHES`).
    prefix: dict[str, dict[str, str]] = field(default_factory=dict)
    # Viterbi hypotheses of the unseen-voice utterances (the test sentences, other voices).
    unseen_hyps: dict[str, str] = field(default_factory=dict)


def log_probs_of(model, utts: Sequence[Utterance], batch_size: int = 16) -> list[np.ndarray]:
    """Per utterance, the model's (T', V) log-probabilities (numpy), in ``utts`` order."""
    import torch

    from speechlab.asr.data import collate

    out = []
    with torch.no_grad():
        for i in range(0, len(utts), batch_size):
            batch = collate(utts[i : i + batch_size])
            lp, lens = model(batch.x, batch.x_lens)
            out += [lp[b, : int(n)].numpy() for b, n in enumerate(lens)]
    return out


def text_of(graph: DecodingGraph, result: ViterbiResult) -> str:
    """The words of a Viterbi result, space-separated."""
    return " ".join(graph.words(result.words))


def tune_on_dev(graph: DecodingGraph, log_probs: Sequence[np.ndarray], references: Sequence[str],
                config: GraphDecodingConfig) -> AcousticWeightSearch:
    """The alpha of ``config.acoustic_weights`` whose Viterbi decoding of the dev utterances
    (their ``log_probs``) has the lowest WER against ``references``."""
    from speechlab.metrics import wer

    return tune_acoustic_weight(graph.fst, graph.num_tokens, log_probs,
                                lambda results: wer(list(references),
                                                    [text_of(graph, r) for r in results]).wer,
                                weights=config.acoustic_weights, config=config.viterbi())


def viterbi_with_lattices(graph: DecodingGraph, utts: Sequence[Utterance],
                          log_probs: Sequence[np.ndarray], config: GraphDecodingConfig,
                          acoustic_weight: float) -> TopologyDecoding:
    """Viterbi decoding of each utterance at ``acoustic_weight`` (eq. 8), then its lattice,
    BPP and BHP (eqs. 10-11) and full-sum decoding over the lattice (eq. 9). A lattice that
    cannot be measured is counted in ``failed`` with the reason, never silently dropped.
    ``dev_wer`` and ``seconds`` are left for the caller."""
    from speechlab.asr.ctc import lattice as lat_mod
    from speechlab.asr.ctc.lattice_metrics import fullsum_best, path_proportions

    decoder = ViterbiDecoder(graph.fst, graph.num_tokens, config.viterbi(acoustic_weight))
    lattice_graph = lat_mod.DecodingGraph.from_fst(graph.fst)
    lcfg = lat_mod.LatticeConfig(beam=config.beam, max_active=config.max_active,
                                 lattice_beam=config.lattice_beam, acoustic_scale=acoustic_weight)
    result = TopologyDecoding({}, acoustic_weight, {}, {}, {}, {}, {}, 0.0)
    for u, lp in zip(utts, log_probs):
        best = decoder.decode(lp)
        result.hyps[u.id] = text_of(graph, best)
        try:
            lattice = lat_mod.generate(lattice_graph, lp, lcfg, utt=u.id)
            props = path_proportions(lattice, best.words)
            result.bpp[u.id], result.bhp[u.id] = props.bpp, props.bhp
            result.agrees[u.id] = fullsum_best(lattice, viterbi=best.words).agrees
        except DataError as e:  # counted and reported, never silently dropped
            result.failed[u.id] = str(e)
    return result


def prefix_search_texts(utts: Sequence[Utterance], log_probs: Sequence[np.ndarray],
                        tokenizer: PhoneTokenizer, arpa: str | Path, beam: int,
                        acoustic_weight: float) -> dict[str, dict[str, str]]:
    """Eq. 9 for plain CTC (S1-T1 outputs): prefix beam search over the words of
    ``tokenizer``'s lexicon, without and with the n-gram LM of ``arpa`` (:data:`PREFIX_SEARCHES`),
    at ``acoustic_weight`` (as tuned for Viterbi). The lexicon is restricted to the LM's words,
    as L∘G is. Returns ``{search: {utterance id: words}}``."""
    from speechlab.search.prefix import (
        LexiconTrie,
        PrefixSearchConfig,
        prefix_beam_search,
    )
    from speechlab.text.ngram import read_arpa

    lm = read_arpa(arpa)
    ids = {p: i + 1 for i, p in enumerate(tokenizer.phones)}
    lm_words = set(lm.vocab)
    lexicon = tokenizer.lexicon
    trie = LexiconTrie.from_dict({w: [[ids[p] for p in pron] for pron in lexicon[w]
                                      if all(p in ids for p in pron)]
                                  for w in lexicon.words if w in lm_words})
    pcfg = PrefixSearchConfig(beam=beam, acoustic_scale=acoustic_weight, lm_log10=True)
    hyps: dict[str, dict[str, str]] = {name: {} for name in PREFIX_SEARCHES}
    for name, word_lm in zip(PREFIX_SEARCHES, (None, lm)):
        for u, lp in zip(utts, log_probs):
            best = prefix_beam_search(lp, pcfg, trie, word_lm)
            hyps[name][u.id] = " ".join(best[0].words) if best else ""
    return hyps


def decode_topology(model, graph: DecodingGraph, test: Sequence[Utterance],
                    dev: Sequence[Utterance], config: GraphDecodingConfig, *,
                    prefix_lexicon: PhoneTokenizer | None = None,
                    arpa: str | Path | None = None,
                    model_dir: str | Path | None = None,
                    unseen: Sequence[Utterance] = ()) -> TopologyDecoding:
    """Viterbi decoding of ``test`` over ``graph`` with the acoustic weight tuned on ``dev``
    (:func:`tune_on_dev`), its lattices measured (:func:`viterbi_with_lattices`); for plain
    CTC, given ``prefix_lexicon`` and the LM's ``arpa``, also the prefix searches
    (:func:`prefix_search_texts`). ``model_dir``: keep the tuned settings beside the model
    there (``decoding.json``), for the recognizer that later loads it. ``unseen``: utterances
    by voices training never heard, Viterbi-decoded at the same weight."""
    start = time.process_time()
    search = tune_on_dev(graph, log_probs_of(model, dev), [u.text for u in dev], config)
    test_lp = log_probs_of(model, test)
    result = viterbi_with_lattices(graph, test, test_lp, config, search.best)
    result.dev_wer = search.errors
    if unseen:
        decoder = ViterbiDecoder(graph.fst, graph.num_tokens, config.viterbi(search.best))
        result.unseen_hyps = {u.id: text_of(graph, decoder.decode(lp))
                              for u, lp in zip(unseen, log_probs_of(model, unseen))}
    if prefix_lexicon is not None and arpa is not None:
        result.prefix = prefix_search_texts(test, test_lp, prefix_lexicon, arpa,
                                            config.prefix_beam, search.best)
    result.seconds = time.process_time() - start
    if model_dir is not None:
        from speechlab.train.card import write_decoding

        write_decoding(model_dir, acoustic_weight=result.acoustic_weight, beam=config.beam,
                       max_active=config.max_active,
                       dev_wer={str(k): v for k, v in result.dev_wer.items()})
    return result
