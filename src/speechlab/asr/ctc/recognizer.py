"""A trained CTC-topology acoustic model as a recognizer: Viterbi decoding over the decoding
graph ``S_dec = T∘L∘G`` it carries (eqs. 7-8 of the CTC-topologies paper), or, for plain CTC,
prefix beam search over its lexicon and n-gram LM (eq. 9).

Audio -> fbank -> CMVN -> the model's per-frame token log-probabilities -> Viterbi over the
graph at the acoustic weight tuned on the run's dev set. The model reads whole utterances, so a
long recording is cut near every ``max_seconds`` at its quietest moment
(:func:`speechlab.audio.chunks.split_points`) and the pieces are decoded one after another:
memory stays bounded. Word times come from the best path (:func:`word_frames`): its word
labels, which an optimized graph may place a few frames before or after the word's phones, and
its pauses (runs of blank), where one word ends and the next begins.

:meth:`CtcRecognizer.from_run` reads a model of ``speechlab reproduce topologies``
(``OUT/models/NAME``: the run's ``lang/`` and ``graphs/`` beside it);
:meth:`~CtcRecognizer.to_package` / :meth:`~CtcRecognizer.from_package` write and read the
self-contained package.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from speechlab.asr.ctc.decode import ViterbiConfig, ViterbiDecoder
from speechlab.asr.ctc.graphs import DecodingGraph, make_lang
from speechlab.asr.ctc.model import FAMILY, CtcModel, CtcModelConfig, load
from speechlab.asr.ctc.phones import PhoneTokenizer
from speechlab.audio.chunks import iter_pieces
from speechlab.audio.features import FbankConfig, fbank
from speechlab.audio.transforms import GlobalCMVN
from speechlab.config import from_dict, to_dict
from speechlab.asr.ctc.onnx_graphs import FILE, OnnxCtcNetwork, export_network
from speechlab.confidence import alternatives, word_confidences
from speechlab.contract import ModelBase, PackageParts, Transcript, Word
from speechlab.devices import device_of
from speechlab.errors import ConfigError, DataError
from speechlab.package import PackageCard, graph_files
from speechlab.text.lexicon import Lexicon
from speechlab.train.card import read_decoding

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # the lattice search loads numba: only analyse_lattice imports it
    from speechlab.asr.ctc.lattice import Lattice
    from speechlab.asr.ctc.lattice_metrics import LatticeSummary

#: Lattices :meth:`CtcRecognizer.analyse_lattice` analyses: at most this many (state, word
#: history) pairs (:func:`~speechlab.asr.ctc.lattice.unique_paths`) and full-sum prefix
#: expansions (:func:`~speechlab.asr.ctc.lattice_metrics.fullsum_nbest`).
MAX_LATTICE_STATES = 200_000
MAX_EXPANSIONS = 20_000
#: The n-best search of transcribe(nbest=N) gives up past this many prefix expansions (a
#: recording whose probability is spread over very many hypotheses gets no alternatives).
NBEST_EXPANSIONS = 3_000


#: A run of blank frames at least this long on the best path is a pause between words
#: (:func:`word_frames`).
PAUSE_SECONDS = 0.3


def word_frames(tokens: np.ndarray, labels: Sequence[int], pause: int) -> list[tuple[int, int]]:
    """Each word's frames ``[start, end)`` on a best path of per-frame ``tokens`` (0: blank)
    whose word labels come at the frames ``labels`` (ascending).

    A label marks a word only roughly: after determinization and minimization the graph may
    emit it some frames before or after the word's phones. So between two labels a pause (at
    least ``pause`` blank frames) ends the earlier word where the first such pause begins and
    starts the later one where the last ends; without one, a word ends after its last non-blank
    frame before the next label. The first word starts at the first non-blank frame after the
    last pause before its label (its phones may come before the label)."""
    tokens = np.asarray(tokens)
    n, total = len(labels), len(tokens)
    voiced = tokens > 0

    def pauses(lo: int, hi: int) -> list[tuple[int, int]]:
        runs, start = [], None
        for f in range(lo, hi):
            if not voiced[f] and start is None:
                start = f
            elif voiced[f] and start is not None:
                if f - start >= pause:
                    runs.append((start, f))
                start = None
        if start is not None and hi - start >= pause:
            runs.append((start, hi))
        return runs

    def first_voiced(lo: int, hi: int) -> int | None:
        found = np.flatnonzero(voiced[lo:hi])
        return lo + int(found[0]) if len(found) else None

    starts = [int(f) for f in labels]
    if n:
        before = pauses(0, starts[0])
        lo = before[-1][1] if before else 0
        early = first_voiced(lo, starts[0])
        if early is not None:
            starts[0] = early
    out = []
    for k in range(n):
        lo, hi = starts[k], (int(labels[k + 1]) if k + 1 < n else total)
        runs = [r for r in pauses(lo, hi) if r[0] > lo]  # a pause after some of the word
        if runs:
            end = runs[0][0]
            if k + 1 < n:
                late = first_voiced(runs[-1][1], hi)
                if late is not None:  # the next word's phones came before its label
                    starts[k + 1] = late
        else:
            found = np.flatnonzero(voiced[lo:hi])
            end = lo + (int(found[-1]) + 1 if len(found) else 1)
        out.append((starts[k], max(end, starts[k] + 1)))
    return out


@dataclass(eq=False)
class _Biased:
    """Hotwords over a decoding graph (the model's, or the one with the words it was given that
    the model's graph lacks): the search arrays of ``graph`` with ``score`` taken off the arcs
    that emit the words ``ids``. No graph is composed or rewritten: the bonus lives in the
    arrays, which our own search (:func:`speechlab.asr.ctc.lattice.generate`) decodes."""

    graph: DecodingGraph
    ids: frozenset[int]
    score: float
    lattice: Any


@dataclass(frozen=True)
class LatticeAnalysis:
    """One utterance's Viterbi words (eq. 8), its lattice (one path per alignment and word
    sequence) made at ``lattice_beam``, and the lattice's summary: the best hypotheses by
    summed path probability, W*'s BPP and BHP (eqs. 10-11), whether full-sum decoding
    agrees (:func:`~speechlab.asr.ctc.lattice_metrics.summarize`)."""

    text: str
    frames: int
    lattice: Lattice
    lattice_beam: float
    summary: LatticeSummary


class CtcRecognizer(ModelBase):
    """A CTC-like acoustic model with its phone tokenizer (lexicon), CMVN statistics, fbank
    settings and decoding graph. ``method``: ``viterbi`` over the graph (every topology) or
    ``prefix`` search over the lexicon with the LM (plain CTC, S1-T1, only)."""

    kind = "asr"
    streaming = False
    family = FAMILY
    title = "a CTC-topology model"
    CAPABILITIES = frozenset({"transcribe", "lattice", "onnx", "hotwords", "new_words",
                              "word_lm"})
    #: Whether a hotword outside the graph's vocabulary is added to it (:meth:`_graph_with`:
    #: a graph built again, seconds of CPU); False refuses it (a shared server's choice).
    new_words: bool = True

    def __init__(self, model: CtcModel, tokenizer: PhoneTokenizer, cmvn: GlobalCMVN,
                 graph: DecodingGraph, *, topology: str, viterbi: ViterbiConfig = ViterbiConfig(),
                 fbank_cfg: FbankConfig = FbankConfig(), arpa: Path | None = None,
                 prefix_beam: int = 32, max_seconds: float = 30.0, source: object = "model"
                 ) -> None:
        if graph.num_tokens != model.config.num_tokens:
            raise DataError(f"{source}: the decoding graph expects {graph.num_tokens} tokens, the "
                            f"model has {model.config.num_tokens}; they are not of one topology")
        dims = {"the model's input": model.config.feature_dim,
                "the CMVN statistics": int(cmvn.mean.shape[0]),
                "the fbank settings": fbank_cfg.num_mel_bins}
        if len(set(dims.values())) > 1:
            said = ", ".join(f"{k} {v}" for k, v in dims.items())
            raise DataError(f"{source}: feature dimensions disagree ({said}); export the model "
                            "again")
        self.model = model.eval()
        self.source = source
        self.tokenizer = tokenizer
        self.cmvn = cmvn
        self.graph = graph
        self.topology = topology
        self.viterbi = viterbi
        self.fbank = fbank_cfg
        self.arpa = arpa
        self.prefix_beam = prefix_beam
        self.max_seconds = max_seconds
        self.languages = (tokenizer.language,)
        self.sample_rate = fbank_cfg.sampling_rate
        self.frame_seconds = fbank_cfg.frame_shift * model.config.subsampling
        self._decoder = ViterbiDecoder(graph.fst, graph.num_tokens, viterbi)
        self._lattice_graph: Any = None  # the graph as the lattice search's arrays, on first use

    @property
    def backend(self) -> str:
        """What runs the acoustic model: ``"torch"`` or ``"onnx"``."""
        return "onnx" if isinstance(self.model, OnnxCtcNetwork) else "torch"

    def onnx(self, threads: int = 1) -> CtcRecognizer:
        """This recognizer with its acoustic model exported to an ONNX graph (in memory) and
        run by onnxruntime on ``threads`` threads; graph, LM and searches are the same."""
        if self.backend == "onnx":
            return self
        network = OnnxCtcNetwork(export_network(self.model), self.model.config, threads)
        return self._with(network)

    def _with(self, network: Any) -> CtcRecognizer:
        rec = CtcRecognizer(network, self.tokenizer, self.cmvn, self.graph,
                            topology=self.topology, viterbi=self.viterbi, fbank_cfg=self.fbank,
                            arpa=self.arpa, prefix_beam=self.prefix_beam,
                            max_seconds=self.max_seconds, source=self.source)
        rec.confidence_map = self.confidence_map
        return rec

    def _needs_torch(self) -> None:
        if self.backend != "torch":
            raise ConfigError("this recognizer runs an ONNX graph; to export it, load the model "
                              "it was exported from (OUT/models/NAME or a PyTorch package)")

    @property
    def methods(self) -> tuple[str, ...]:  # type: ignore[override]
        """Viterbi over the graph; prefix search too for plain CTC with an LM."""
        return ("viterbi", "prefix") if self.topology == "S1-T1" and self.arpa else ("viterbi",)

    # -----------------------------------------------------------------------------------------
    # Recognition

    def log_probs(self, samples: np.ndarray) -> np.ndarray:
        """(T', V) log-probabilities of one piece of audio at the model's sample rate."""
        feats = torch.from_numpy(fbank(samples, self.fbank))
        lens = torch.tensor([feats.shape[0]])
        if int(self.model.subsampling.output_lengths(lens)[0]) <= 0:  # shorter than its input
            return np.zeros((0, self.graph.num_tokens), np.float32)
        x = self.cmvn(feats[None], lens)[0]
        device = device_of(self.model)
        with torch.inference_mode():
            lp, lens = self.model(x.to(device), lens.to(device))
        return lp[0, : int(lens[0])].float().cpu().numpy()

    def _networks_to(self, device: torch.device) -> None:
        """The acoustic model on ``device``; the graph search stays on the CPU."""
        self.model.to(device)

    def transcribe(self, audio: Any, sample_rate: int = 16000, language: str | None = None, *,
                   method: str | None = None, beam: int | None = None, nbest: int = 0,
                   hotwords: Sequence[str] | None = None, hotword_score: float = 2.0,
                   progress: Callable[[float], None] | None = None) -> Transcript:
        """``audio`` (a path, or mono samples at ``sample_rate``) -> its :class:`Transcript`.
        ``method``: ``viterbi`` (default) or ``prefix``; ``beam``: the Viterbi beam (cost
        units) or the prefix search's width; ``progress`` is called with the seconds of audio
        done after each piece. ``nbest`` > 0 (Viterbi): each piece's lattice gives the
        ``nbest`` most probable distinct texts, each with its share of the lattice's summed
        path weight (the decoder's, LM included), and each word its confidence
        (:mod:`speechlab.confidence`); a lattice too large to search gives none.
        ``hotwords`` (Viterbi): words whose arcs in T∘L∘G cost ``hotword_score`` less (natural
        log; a phrase boosts each of its words). A hotword the graph lacks is added first: its
        pronunciation comes from where the lexicon's came from (CMUdict, else espeak-ng;
        :func:`~speechlab.asr.ctc.phones.lexicon_for`), the LM gets it as a unigram as likely
        as its median word, and T∘L∘G is built again with it (seconds; cached, so the same
        words load at once the next time)."""
        if language is not None and language not in self.languages:
            raise ConfigError(f"language {language!r}: this model knows {list(self.languages)}")
        method = method or "viterbi"
        if method not in ("viterbi", "prefix"):
            raise ConfigError(f"method {method!r}: choose viterbi or prefix")
        if method == "prefix" and (self.topology != "S1-T1" or self.arpa is None):
            raise ConfigError("prefix search decodes plain CTC (S1-T1) with its LM; this model "
                              f"is {self.topology}" + ("" if self.arpa else " without an LM"))
        biased = self._boosted(hotwords, hotword_score, method) if hotwords else None
        texts: list[str] = []
        words: list[Word] = []
        pieces_alts: list[list[tuple[str, float]]] = []
        for offset, piece in iter_pieces(audio, sample_rate, self.sample_rate, self.max_seconds):
            lp = self.log_probs(piece)
            if progress is not None:
                progress(offset + len(piece) / self.sample_rate)
            if not len(lp):
                continue
            if method == "viterbi":
                text, found = self._viterbi(lp, beam, offset, biased)
                if nbest > 0:
                    alts = self._alternatives(lp, text, nbest, biased)
                    pieces_alts.append(alts)
                    conf = self.calibrated(word_confidences([w.word for w in found], alts)) \
                        if alts else [None] * len(found)
                    found = [Word(w.word, w.start, w.end, c) for w, c in zip(found, conf)]
                words += found
            else:
                text = self._prefix(lp, beam)
            texts.append(text)
        alternatives_ = None
        if nbest > 0 and method == "viterbi":
            if len(pieces_alts) == 1 and pieces_alts[0]:
                alternatives_ = tuple(pieces_alts[0][:nbest])
            else:  # several pieces (or none): the joined best text, its probability a product
                p = 1.0
                for alts in pieces_alts:
                    p *= alts[0][1] if alts else 1.0
                alternatives_ = ((" ".join(t for t in texts if t), round(p, 4)),)
        return Transcript(" ".join(t for t in texts if t), self.tokenizer.language, None,
                          tuple(words) if method == "viterbi" else None, nbest=alternatives_)

    def _alternatives(self, lp: np.ndarray, best_text: str, n: int,
                      biased: _Biased | None = None) -> list[tuple[str, float]]:
        """The lattice's ``n`` most probable distinct texts (at least 10 searched, for the
        words' confidence) with their shares; [] when the lattice is too large to search
        (more than :data:`NBEST_EXPANSIONS` prefix expansions). ``biased``: over the graph
        with hotwords."""
        from speechlab.asr.ctc import lattice
        from speechlab.asr.ctc.lattice_metrics import fullsum_nbest, path_proportions

        if biased is not None:
            arrays, graph = biased.lattice, biased.graph
        else:
            arrays, graph = self._arrays_of(self.graph), self.graph
        v = self.viterbi
        cfg = lattice.LatticeConfig(beam=v.beam, max_active=v.max_active, lattice_beam=4.0,
                                    acoustic_scale=v.acoustic_weight, unique_paths=False)
        try:
            lat = lattice.generate(arrays, lp, cfg, utt="utterance")
            ranked = fullsum_nbest(lat, max(n, 10), "total", NBEST_EXPANSIONS)
            total = path_proportions(lat, ranked[0][0], "total").log_total
        except DataError:
            return []
        return alternatives([" ".join(graph.words(w)) for w, _ in ranked],
                            [math.exp(min(0.0, s - total)) for _, s in ranked], log=False)

    def analyse_lattice(self, samples: np.ndarray, lattice_beam: float = 8.0, nbest: int = 5
                        ) -> LatticeAnalysis:
        """Viterbi decoding of one utterance (mono samples at the model's sample rate) and the
        analysis of its lattice, made with the search this recognizer decodes with (acoustic
        weight, beam, max-active): :class:`LatticeAnalysis`. A lattice too large to analyse
        (:data:`MAX_LATTICE_STATES`) is made again with half the lattice beam until it fits
        (the beam used is in the result). Not thread-safe: one call at a time."""
        from speechlab.asr.ctc import lattice
        from speechlab.asr.ctc.lattice_metrics import summarize

        lp = self.log_probs(samples)
        if not len(lp):
            raise DataError("the recording is too short to give one output frame")
        best = self._decoder.decode(lp)
        arrays = self._arrays_of(self.graph)
        v, beam = self.viterbi, lattice_beam
        while True:
            cfg = lattice.LatticeConfig(beam=v.beam, max_active=v.max_active, lattice_beam=beam,
                                        acoustic_scale=v.acoustic_weight, unique_paths=False)
            raw = lattice.generate(arrays, lp, cfg, utt="utterance")
            try:
                lat = lattice.unique_paths(raw, max_states=MAX_LATTICE_STATES)
                break
            except DataError:
                if beam < 1.0:
                    raise DataError("the lattice of this recording is too large to analyse, "
                                    "even pruned hard; try a shorter recording") from None
                beam /= 2
        return LatticeAnalysis(" ".join(self.graph.words(best.words)), int(lp.shape[0]), lat,
                               beam, summarize(lat, best.words, nbest,
                                               max_expansions=MAX_EXPANSIONS))

    def _boosted(self, hotwords: Sequence[str], score: float, method: str) -> _Biased:
        """The search arrays with the arcs that emit a hotword's words made ``score`` cheaper,
        words it lacks added to the graph first (:meth:`_graph_with`); kept for the next call
        with the same hotwords. A new set of known words costs a pass over the arrays (tens of
        milliseconds on en_ctc_t2), not a new graph."""
        from speechlab.text.normalize import normalize_text

        if method != "viterbi":
            raise ConfigError("hotwords bias the Viterbi search over T∘L∘G; method "
                              f"{method!r} does not take them")
        if not 0 < score <= 100:
            raise ConfigError(f"hotword score must be in (0, 100], got {score}")
        language = self.tokenizer.language
        words = [w for phrase in hotwords
                 for w in (normalize_text(phrase, language).split() or [phrase])]
        known = self.graph.lang.word_index()
        new = tuple(w for w in dict.fromkeys(words) if w not in known)
        key = (new, tuple(sorted(set(words))), float(score))
        cache = self.__dict__.setdefault("_boosted_sets", {})
        if key not in cache:
            graph = self.graph
            if new:
                added = self.__dict__.get("_added_words")
                if added is None or added[0] != new:  # one such graph kept at a time
                    added = self.__dict__["_added_words"] = (new, self._graph_with(new))
                graph = added[1]
            index = graph.lang.word_index()
            ids = frozenset(index[w] for w in words)
            cache.clear()  # one set at a time: its arrays are as large as the graph's
            cache[key] = _Biased(graph, ids, float(score),
                                 self._boosted_arrays(graph, ids, float(score)))
        return cache[key]

    def _arrays_of(self, graph: DecodingGraph) -> Any:
        """The lattice search's arrays of ``graph``: the model's own, or those of the one graph
        with added words kept (:meth:`_boosted`), each made once."""
        from speechlab.asr.ctc import lattice

        if graph is self.graph:
            if self._lattice_graph is None:
                self._lattice_graph = lattice.DecodingGraph.from_fst_cached(graph.fst,
                                                                            graph.source)
            return self._lattice_graph
        kept = self.__dict__.get("_added_arrays")
        if kept is None or kept[0] is not graph:
            # not kept on disk: each new set of words would add a graph's worth of arrays
            kept = (graph, lattice.DecodingGraph.from_fst(graph.fst))
            self.__dict__["_added_arrays"] = kept
        return kept[1]

    def _boosted_arrays(self, graph: DecodingGraph, ids: frozenset[int], score: float) -> Any:
        """The search arrays of ``graph`` with the arcs that emit the words ``ids`` costing
        ``score`` less: what composing T∘L∘G with a one-state transducer that charges those
        words ``-score`` would give, without the composition (1.5 s on en_ctc_t2)."""
        import numpy as np

        base = self._arrays_of(graph)
        wanted = np.fromiter(sorted(ids), np.int64)
        return replace(base, e_w=base.e_w - score * np.isin(base.e_word, wanted),
                       n_w=base.n_w - score * np.isin(base.n_word, wanted))

    def use_word_lm(self, arpa: str | Path) -> None:
        """Decode with the word n-gram LM ``arpa`` (ARPA, plain or gzip-compressed;
        ``speechlab ctc lm`` estimates one) instead of the model's own from now on: the graph's
        vocabulary becomes the LM's words. Those the lexicon lacks are pronounced as its words
        were (:func:`~speechlab.asr.ctc.phones.lexicon_for`); those the model's phones cannot
        spell are left out (counted in the log). T∘L∘G is built again from the lexicon and this
        LM (a minute or more for a large LM) and cached by content, so once per LM."""
        from speechlab.asr.ctc.graphs import cached_decoding_graph
        from speechlab.files import cache_dir
        from speechlab.text.ngram import arpa_vocab

        arpa = Path(arpa)
        if not arpa.is_file():
            raise DataError(f"word LM {arpa}: no such file")
        vocab = arpa_vocab(arpa)  # checked in full when its graph is built
        new = [w for w in vocab if w not in self.tokenizer.lexicon]
        try:
            merged = self._pronounced(new)
        except DataError as e:
            raise ConfigError(f"word LM {arpa}: {len(new)} of its words are not in this "
                              f"model's lexicon and cannot be pronounced here ({e})") from None
        spelt = sum(w in merged for w in new)
        log.info("word LM %s: %d words, %d of them new to the lexicon (%d pronounced, %d left "
                 "out); building T∘L∘G (once, then cached)", arpa, len(vocab), len(new), spelt,
                 len(new) - spelt)
        graph = cached_decoding_graph(cache_dir("graphs"), self.topology, merged, arpa,
                                      phones=self.tokenizer.phones, recipe=self.graph.recipe)
        self.tokenizer = PhoneTokenizer(merged, self.tokenizer.language, self.tokenizer.phones)
        self.graph, self.arpa = graph, arpa
        self._decoder = ViterbiDecoder(graph.fst, graph.num_tokens, self.viterbi)
        self._lattice_graph = None
        for cached in ("_boosted_sets", "_added_words", "_added_arrays", "_prefix_parts"):
            self.__dict__.pop(cached, None)

    def _pronounced(self, words: Sequence[str]) -> Lexicon:
        """The model's lexicon with ``words`` added as its words were pronounced
        (:func:`~speechlab.asr.ctc.phones.lexicon_for`: CMUdict, else espeak-ng), only the
        pronunciations its phones can spell; a word with none is left out. Raises
        :class:`DataError` when there is no pronunciation source here."""
        from speechlab.asr.ctc.phones import lexicon_for

        lexicon = self.tokenizer.lexicon
        out = Lexicon({w: lexicon[w] for w in lexicon.words})
        if words:
            phones = set(self.tokenizer.phones)
            found = lexicon_for(self.tokenizer.language, words)
            for w in words:
                for p in found.get(w) or []:
                    if all(q in phones for q in p):
                        out.add(w, p)
        return out

    def _graph_with(self, new: Sequence[str]) -> DecodingGraph:
        """T∘L∘G with the words ``new`` added: pronounced as the training lexicon's words were
        (:func:`~speechlab.asr.ctc.phones.lexicon_for`), each in the LM as a unigram as likely
        as its median word. Built again from the lexicon and LM and cached by content
        (:func:`~speechlab.asr.ctc.graphs.cached_decoding_graph`)."""
        from speechlab.asr.ctc.graphs import cached_decoding_graph
        from speechlab.files import cache_dir, scratch_dir
        from speechlab.text.ngram import BOS, EOS, ArpaLM, read_arpa

        said = ", ".join(repr(w) for w in new)
        if not self.new_words:
            raise ConfigError(f"hotwords {said}: not in this model's vocabulary, and adding "
                              "words is off here (speechlab serve --new-words allows it)")
        if self.arpa is None:
            raise ConfigError(f"hotwords {said}: not in this model's vocabulary, and it has no "
                              "LM to add them to")
        try:
            lexicon = self._pronounced(new)
        except DataError as e:
            raise ConfigError(f"hotwords {said}: not in this model's vocabulary, and they cannot "
                              f"be pronounced here ({e})") from None
        for w in new:
            if w not in lexicon:
                raise ConfigError(f"hotword {w!r} is not in this model's vocabulary and cannot "
                                  f"be spelt with its {self.tokenizer.language} phones")
        lm = read_arpa(self.arpa)
        probs = sorted(lp for (w,), (lp, _) in lm.ngrams[0].items() if w not in (BOS, EOS))
        typical = probs[len(probs) // 2]  # a word someone names is as likely as the median one
        # the n-grams of LM words without a pronunciation go (the graph build skips them)
        grams = [{g: v for g, v in order.items()
                  if all(w in lexicon or w in (BOS, EOS) for w in g)} for order in lm.ngrams]
        for w in new:
            grams[0][(w,)] = (typical, None)
        log.info("hotwords %s: not in the vocabulary; pronounced %s and added to T∘L∘G (built "
                 "once, then cached)", said,
                 "; ".join(f"{w} /{' '.join(lexicon[w][0])}/" for w in new))
        with scratch_dir("hotword-lm") as tmp:
            arpa = tmp / "lm.arpa"
            ArpaLM(grams).write(arpa)
            return cached_decoding_graph(cache_dir("graphs"), self.topology, lexicon, arpa,
                                         phones=self.tokenizer.phones, recipe=self.graph.recipe)

    def _viterbi(self, lp: np.ndarray, beam: int | None, offset: float,
                 biased: _Biased | None = None) -> tuple[str, list[Word]]:
        graph = biased.graph if biased is not None else self.graph
        best = self._biased_best(lp, beam, biased) if biased is not None else None
        if best is None:
            decoder = self._decoder
            if beam is not None:
                decoder = ViterbiDecoder(decoder.fst, self.graph.num_tokens,
                                         replace(self.viterbi, beam=float(beam)))
            best = decoder.decode(lp)
            graph = self.graph
        names = graph.words(best.words)
        pause = max(1, round(PAUSE_SECONDS / self.frame_seconds))
        spans = word_frames(np.asarray(best.tokens), best.word_frames, pause)
        out = [Word(name, offset + start * self.frame_seconds, offset + end * self.frame_seconds)
               for name, (start, end) in zip(names, spans)]
        return " ".join(names), out

    def _biased_best(self, lp: np.ndarray, beam: int | None, biased: _Biased) -> Any:
        """The best path over the hotwords' arrays by our own beam search (the Viterbi
        decoder's beam and max-active), or None when no path reaches a final state within the
        beam (the model's decoder then gives its best partial path, without the bonus)."""
        from speechlab.asr.ctc import lattice

        v = self.viterbi
        cfg = lattice.LatticeConfig(beam=float(beam) if beam is not None else v.beam,
                                    max_active=v.max_active, lattice_beam=0.0,
                                    acoustic_scale=v.acoustic_weight, unique_paths=False)
        try:
            return lattice.generate(biased.lattice, lp, cfg, utt="utterance").best_path()
        except DataError:
            return None

    def _prefix(self, lp: np.ndarray, beam: int | None) -> str:
        from speechlab.search.prefix import (LexiconTrie, PrefixSearchConfig,
                                                     prefix_beam_search)
        from speechlab.text.ngram import read_arpa

        if not hasattr(self, "_prefix_parts"):
            lm = read_arpa(self.arpa)
            ids = {p: i + 1 for i, p in enumerate(self.tokenizer.phones)}
            lex = self.tokenizer.lexicon
            trie = LexiconTrie.from_dict({w: [[ids[p] for p in pron] for pron in lex[w]
                                              if all(p in ids for p in pron)]
                                          for w in lex.words if w in set(lm.vocab)})
            self._prefix_parts = (trie, lm)
        trie, lm = self._prefix_parts
        cfg = PrefixSearchConfig(beam=beam or self.prefix_beam,
                                 acoustic_scale=self.viterbi.acoustic_weight, lm_log10=True)
        best = prefix_beam_search(lp, cfg, trie, lm)
        return " ".join(best[0].words) if best else ""

    # -----------------------------------------------------------------------------------------
    # Loading and export

    @classmethod
    def from_run(cls, model_dir: str | Path, **kw: Any) -> CtcRecognizer:
        """A model of ``speechlab reproduce topologies`` with its run's tokenizer, CMVN, LM
        and decoding graph, at the acoustic weight its decoding chose on dev."""
        from speechlab.asr.ctc.graphs import cached_decoding_graph

        model_dir = Path(model_dir)
        run = model_dir.parent.parent
        model = load(model_dir)
        cfg = model.config
        if not cfg.topology or not cfg.language:
            raise DataError(f"{model_dir}: its checkpoint does not say its topology and language "
                            "(trained before they were recorded); train it again")
        tokenizer = PhoneTokenizer.load(run / "lang" / f"{cfg.language}.json")
        arpa = run / "lang" / f"{cfg.language}.arpa"
        graph = cached_decoding_graph(run / "graphs", cfg.topology, tokenizer.lexicon, arpa,
                                      phones=tokenizer.phones)
        settings = read_decoding(model_dir)  # as the run decoded it, tuned on its dev set
        viterbi = ViterbiConfig(beam=float(settings.get("beam", 32.0)),
                                max_active=int(settings.get("max_active", 2000)),
                                acoustic_weight=float(settings.get("acoustic_weight", 1.0)))
        return cls(model, tokenizer, GlobalCMVN.load(run / "lang" / "cmvn.safetensors"), graph,
                   topology=cfg.topology, viterbi=viterbi,
                   arpa=arpa, source=model_dir, **kw)

    def to_package(self) -> PackageParts:
        self._needs_torch()
        return self.package_parts(self.model, *self._data_and_files())

    def to_onnx_package(self) -> PackageParts:
        """The package with the acoustic model as an ONNX graph (``acoustic.onnx``) beside
        the same decoding graph, lexicon and LM."""
        self._needs_torch()
        return self.package_parts(self.model, *self._data_and_files(),
                                  onnx={"acoustic": (FILE, export_network(self.model))})

    def _data_and_files(self) -> tuple[dict[str, Any], dict[str, tuple[str, Any]]]:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            self.graph.fst.write(str(Path(tmp) / "graph.fst"))
            graph_bytes = (Path(tmp) / "graph.fst").read_bytes()
        lexicon = {"language": self.tokenizer.language, "phones": list(self.tokenizer.phones),
                   "lexicon": {w: [list(p) for p in self.tokenizer.lexicon[w]]
                               for w in self.tokenizer.lexicon.words}}
        files: dict[str, tuple[str, Any]] = {
            "graph": ("graph.fst", graph_bytes),
            "lexicon": ("lexicon.json", json.dumps(lexicon, ensure_ascii=False).encode())}
        if self.arpa is not None:
            files["lm"] = ("lm.arpa", self.arpa)
        data = {"topology": self.topology, "viterbi": to_dict(self.viterbi),
                "fbank": to_dict(self.fbank), "prefix_beam": self.prefix_beam,
                "cmvn": self.cmvn.to_dict(),
                "graph": {"num_tokens": self.graph.num_tokens, "recipe": self.graph.recipe,
                          "num_words": self.graph.lang.num_words, "info": self.graph.info},
                "streaming": False, "methods": ["viterbi"] + (
                    ["prefix"] if self.topology == "S1-T1" and self.arpa else []),
                # a lean package (speechlab models ship) leaves the graph out: it is rebuilt
                # from the lexicon and the LM at load, and cached
                "rebuildable": ["graph"] if self.arpa is not None else []}
        return data, files

    @classmethod
    def from_package(cls, path: Path, card: PackageCard, model: torch.nn.Module | None
                     ) -> CtcRecognizer:
        """The recognizer of the package at ``path`` and its ``model``; None for an ONNX
        package (its ``acoustic.onnx`` runs in onnxruntime)."""
        import kaldifst

        from speechlab.text.ngram import arpa_vocab

        if model is None:
            model = OnnxCtcNetwork(  # type: ignore[assignment]
                graph_files(path, card, ["acoustic"])["acoustic"],
                from_dict(CtcModelConfig, dict(card.config)))
        d = card.data
        lex = json.loads((path / card.files["lexicon"]).read_text(encoding="utf-8"))
        tokenizer = PhoneTokenizer(Lexicon(lex["lexicon"]), lex["language"], lex["phones"])
        arpa = path / card.files["lm"] if "lm" in card.files else None
        words = tokenizer.lexicon
        if arpa is not None:  # the graph's words: the lexicon's words the LM knows
            words = words.subset(arpa_vocab(arpa))
        lang = make_lang(words, tokenizer.phones)
        g = d["graph"]
        if lang.num_words != g["num_words"]:
            raise DataError(f"{path}: the lexicon and LM give {lang.num_words} words, the "
                            f"graph was built over {g['num_words']}; export the model again")
        if "graph" in card.files:
            graph = DecodingGraph(kaldifst.StdVectorFst.read(str(path / card.files["graph"])),
                                  g["num_tokens"], lang, d["topology"], g["recipe"], g["info"])
        else:  # a lean package: T∘L∘G built again from its lexicon and LM (once; then cached)
            if arpa is None:
                raise DataError(f"{path}: a package without its decoding graph or the LM to "
                                "build it from; export the model again")
            from speechlab.asr.ctc.graphs import cached_decoding_graph
            from speechlab.files import cache_dir

            graph = cached_decoding_graph(cache_dir("graphs"), d["topology"], tokenizer.lexicon,
                                          arpa, phones=tokenizer.phones, recipe=g["recipe"])
            if (graph.num_tokens, graph.lang.num_words) != (g["num_tokens"], g["num_words"]):
                raise DataError(f"{path}: the graph built from its lexicon and LM has "
                                f"{graph.num_tokens} tokens and {graph.lang.num_words} words, "
                                f"the card says {g['num_tokens']} and {g['num_words']}")
        return cls(model, tokenizer, GlobalCMVN.from_dict(d["cmvn"]), graph,
                   topology=d["topology"], viterbi=from_dict(ViterbiConfig, d["viterbi"]),
                   fbank_cfg=from_dict(FbankConfig, d["fbank"]), arpa=arpa,
                   prefix_beam=int(d["prefix_beam"]), source=path)
