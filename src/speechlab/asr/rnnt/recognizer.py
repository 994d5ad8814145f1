"""A trained multi-softmax-family RNN-T as a recognizer: ``transcribe`` a recording, or
``stream`` audio as it arrives (``accept_waveform``, ``partial``, ``finish``), with the
language given or found by the LID head (Sec. 4.2) and early stopping of the decoders whose LID
score falls behind (Sec. 6.3).

Audio -> online fbank (kaldi-native-fbank, the same frames as the training features for any
chunking) -> CMVN -> the streaming encoder and searches of :mod:`.search` /
:mod:`.multilingual_decode`, fed every ``chunk_frames`` feature frames. The networks run in
PyTorch, or as ONNX graphs in onnxruntime (:mod:`.onnx_graphs`): the searches are the same
code either way (:mod:`.networks`). Memory stays bounded
for any length: feature frames are dropped once the encoder has consumed them, and the searches
keep only their hypotheses. Word times come from the encoder frame each label was emitted on.

:meth:`RnntRecognizer.from_run` reads a reproduction's model directory (``OUT/models/NAME``,
its run's ``lang/`` beside it); :meth:`~RnntRecognizer.to_package` /
:meth:`~RnntRecognizer.from_package` write and read the self-contained package
(:mod:`speechlab.package`), :meth:`~RnntRecognizer.to_onnx_package` one whose networks are
ONNX graphs, and :meth:`~RnntRecognizer.onnx` gives the recognizer on graphs exported in
memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from speechlab.asr.rnnt.config import DecodeConfig, EarlyStopConfig, SearchConfig
from speechlab.asr.rnnt.encoder import ConvTransformerEncoder
from speechlab.asr.rnnt.model import BUILDERS, FAMILY, RNNT, load, text_of
from speechlab.asr.rnnt.multilingual_decode import LidFreeDecoder, allowed_languages
from speechlab.asr.rnnt.networks import RnntNetworks
from speechlab.asr.rnnt.search import StreamingDecoder
from speechlab.audio.chunks import iter_blocks
from speechlab.audio.features import FbankConfig, knf_options
from speechlab.audio.io import as_samples
from speechlab.audio.transforms import GlobalCMVN
from speechlab.config import from_dict, to_dict
from speechlab.contract import ModelBase, PackageParts, Transcript, Word, words_from_tokens
from speechlab.confidence import alternatives, label_confidence, word_confidences
from speechlab.endpoint import EndpointConfig
from speechlab.errors import ConfigError, DataError
from speechlab.package import PackageCard, graph_files
from speechlab.search.lm_fusion import TokenLM
from speechlab.search.context import ContextGraph
from speechlab.text.graphemes import WORD_START, GraphemeTokenizer
from speechlab.train.card import read_decoding


#: Segment length of streams whose encoder state grows with the audio (the causal Transformer's
#: key/value cache: 9 KB per 40 ms frame for the ``fast`` preset, 14 MB at 60 s). On 10 minutes
#: of joined test utterances (benchmarks/rnnt_segments.py, docs/runtime.md "Long inputs") the WER of
#: segments of 20, 60 and 120 s is the same within a point and worse at 10 s (more words cut
#: apart), while a chunk's cost grows with its segment's cached frames: RTF 0.021, 0.025 and
#: 0.031 (English, language given), 0.15 for one 10-minute segment. 60 s cuts a third as often
#: as 20 s, for little.
SEGMENT_SECONDS = 60.0


class RnntRecognizer(ModelBase):
    """An RNN-T of the multi-softmax family with what it needs to read audio: one grapheme
    tokenizer per language, the training CMVN statistics and fbank settings, and the search.
    ``chunk_frames``: feature frames (10 ms) the encoder takes at a time when streaming.
    ``networks`` run the model (default: PyTorch; ONNX graphs with ``model`` describing
    them, :mod:`.onnx_graphs`)."""

    kind = "asr"
    streaming = True
    family = FAMILY
    title = "a multi-softmax RNN-T"
    methods = ("beam", "greedy", "modified_beam")

    def __init__(self, model: RNNT, tokenizers: Mapping[str, GraphemeTokenizer], cmvn: GlobalCMVN,
                 fbank: FbankConfig = FbankConfig(), search: SearchConfig = SearchConfig(),
                 chunk_frames: int = 32, source: object = "model",
                 networks: RnntNetworks | None = None) -> None:
        for lang, size in zip(model.languages, model.vocab_sizes):
            tok = tokenizers.get(lang)
            if tok is None:
                raise DataError(f"{source}: no tokenizer for language {lang!r}")
            if len(tok) != size:
                raise DataError(f"{source}: the {lang} tokenizer has {len(tok)} symbols, but the "
                                f"model has {size}; it was trained with another tokenizer")
        if cmvn.mean.shape[0] != fbank.num_mel_bins:
            raise DataError(f"{source}: CMVN statistics of {cmvn.mean.shape[0]}-dim features, "
                            f"the model reads {fbank.num_mel_bins}-dim fbank")
        self.model = model.eval()
        self.networks = networks if networks is not None else RnntNetworks.torch(self.model)
        self.tokenizers = dict(tokenizers)
        self.cmvn = cmvn
        self.fbank = fbank
        self.search = search
        self.chunk_frames = chunk_frames
        # Streams of an encoder whose state grows with the audio are decoded in segments of
        # about this many seconds (RnntStream); None: one segment, whatever the length.
        self.segment_seconds: float | None = (
            SEGMENT_SECONDS if isinstance(model.encoder, ConvTransformerEncoder) else None)
        self.languages: tuple[str, ...] = tuple(model.languages)
        #: token LMs fused into each language's search (:meth:`use_lm`)
        self.lms: dict[str, TokenLM] = {}
        self.sample_rate = fbank.sampling_rate
        # Seconds per encoder frame: the feature shift times the encoder's subsampling.
        self.frame_seconds = fbank.frame_shift * model.dims.subsampling

    @property
    def backend(self) -> str:
        """What runs the networks: ``"torch"`` or ``"onnx"``."""
        return self.networks.backend

    @property
    def lid_free(self) -> bool:
        """Whether the model can decode without being told the language (a LID head)."""
        return self.model.spec.lang_output and self.model.lid_head is not None

    @property
    def capabilities(self) -> frozenset[str]:
        own = {"transcribe", "stream", "onnx"} | ({"early_stop"} if self.lid_free else set()) \
            | (set() if self.model.spec.union_vocab else {"hotwords", "lm_fusion"})
        return frozenset(own)

    # -----------------------------------------------------------------------------------------
    # Recognition

    def stream(self, language: str | None = None, *, tau: float = math.inf,
               s_th: float = math.inf, beam: int | None = None,
               method: str | None = None, endpoint: EndpointConfig | None = None,
               languages: Sequence[str] | None = None, nbest: int = 0,
               hotwords: Sequence[str] | None = None, hotword_score: float = 2.0
               ) -> RnntStream:
        """A stream for one recording (module doc). ``language``: decode that language only;
        None: the model's one language, or, for a model with a LID head, every language's
        decoder with the LID head picking, decoders switched off after ``tau`` encoder frames
        when their LID score is ``s_th`` below the best's. ``beam``, ``method``: the search's
        (default: the model's). ``endpoint``: the rules of ``is_endpoint`` (default:
        :class:`~speechlab.endpoint.EndpointConfig`'s). ``languages``: an allowlist for a
        model with a LID head: only those decoders start and the LID head chooses among them
        (its posteriors renormalised over them). ``nbest``: each result's ``nbest`` holds
        that many of the beam's distinct texts with their posteriors (0: none).
        ``hotwords``: words or phrases the search is biased towards, ``hotword_score`` per
        grapheme of a whole match (:mod:`speechlab.search.context`), in every language whose
        graphemes spell them."""
        if languages is not None:
            if language is not None:
                raise ConfigError("give the language or an allowlist of languages, not both")
            if not self.lid_free:
                raise ConfigError("an allowlist of languages needs a model with a LID head "
                                  "(multisoftmax_lid); give the language instead")
            languages = allowed_languages(self.languages, languages)
        search = self.search if beam is None else replace(self.search, beam=beam)
        if method is not None:
            if method not in self.methods:
                raise ConfigError(f"method {method!r}: this model decodes with "
                                  f"{', '.join(self.methods)}")
            search = replace(search, method=method)
        stream = RnntStream(self, self._language(language), EarlyStopConfig(tau=tau, s_th=s_th),
                            search, endpoint or EndpointConfig(), languages)
        stream.nbest = nbest
        if hotwords:
            stream.context = self._context(hotwords, hotword_score)
            stream._decoder = stream._new_decoder()
        return stream

    def use_lm(self, language: str, arpa: Any, weight: float, bonus: float = 0.0) -> None:
        """Fuse a token n-gram LM into ``language``'s search from now on (streams made after):
        ``arpa`` a path or an :class:`~speechlab.text.ngram.ArpaLM` whose words are the
        language's tokens (``speechlab rnnt lm`` estimates one), ``weight`` its scale,
        ``bonus`` a score per label (:mod:`speechlab.search.lm_fusion`)."""
        from speechlab.text.ngram import ArpaLM, read_arpa

        if self.model.spec.union_vocab:
            raise ConfigError("LM fusion is for models with a softmax per language; this "
                              f"{self.model.variant} model pools its labels")
        if language not in self.tokenizers:
            raise ConfigError(f"LM for language {language!r}: this model decodes "
                              f"{', '.join(self.languages)}")
        lm = arpa if isinstance(arpa, ArpaLM) else read_arpa(arpa)
        self.lms[language] = TokenLM(lm, self.tokenizers[language].symbols, weight, bonus=bonus)

    def _context(self, hotwords: Sequence[str], score: float) -> dict[str, ContextGraph]:
        """Each language's context graph of the ``hotwords`` its graphemes spell."""
        if self.model.spec.union_vocab:
            raise ConfigError("hotwords are for models with a softmax per language; this "
                              f"{self.model.variant} model pools its labels")
        if not score > 0 or score > 100:
            raise ConfigError(f"hotword score must be in (0, 100], got {score}")
        graphs: dict[str, ContextGraph] = {}
        spelled: set[str] = set()
        for lang, tok in self.tokenizers.items():
            seqs = []
            for word in hotwords:
                try:
                    seqs.append(tok.encode(word))
                    spelled.add(word)
                except DataError:
                    continue  # not this language's script
            if any(seqs):
                graphs[lang] = ContextGraph(seqs, score)
        missing = [w for w in hotwords if w not in spelled or not w.strip()]
        if missing:
            raise ConfigError(f"hotword {missing[0]!r}: no language of this model spells it "
                              "with its graphemes")
        return graphs

    def transcribe(self, audio: Any, sample_rate: int = 16000, language: str | None = None, *,
                   beam: int | None = None, tau: float = math.inf, s_th: float = math.inf,
                   method: str | None = None, languages: Sequence[str] | None = None,
                   nbest: int = 0, hotwords: Sequence[str] | None = None,
                   hotword_score: float = 2.0,
                   progress: Callable[[float], None] | None = None) -> Transcript:
        """``audio`` (a file path, or mono samples at ``sample_rate``) -> its :class:`Transcript`.
        The same result as streaming it in any chunks; a file is read a block at a time.
        ``progress`` is called with the seconds of audio done after each block; ``languages``
        as :meth:`stream` takes it."""
        stream = self.stream(language, tau=tau, s_th=s_th, beam=beam, method=method,
                             languages=languages, nbest=nbest, hotwords=hotwords,
                             hotword_score=hotword_score)
        for offset, piece in iter_blocks(audio, sample_rate, self.sample_rate, 30.0):
            stream.accept_waveform(piece, self.sample_rate)
            if progress is not None:
                progress(offset + len(piece) / self.sample_rate)
        return stream.finish()

    def _language(self, language: str | None) -> str | None:
        if language is not None:
            if language not in self.languages:
                raise ConfigError(f"language {language!r}: this model knows "
                                  f"{list(self.languages)}")
            return language
        if len(self.languages) == 1 or (self.model.spec.union_vocab
                                        and not self.model.spec.lang_onehot):
            return None
        if not self.lid_free:
            raise ConfigError(f"the {self.model.variant} model needs the language (one of "
                              f"{list(self.languages)}): it has no LID head to find it")
        return None

    def text(self, tokens: tuple[int, ...], language: str | None) -> str:
        if language is None and len(self.languages) == 1:  # a one-language model's own
            language = self.languages[0]
        return text_of(self.model, tokens, language, self.tokenizers)

    def words(self, tokens: tuple[int, ...], times: tuple[int, ...], language: str | None,
              spans: list[tuple[int, int]] | None = None) -> tuple[Word, ...]:
        """Words and their times from emitted labels and the encoder frames they came on
        (``spans``: each word's labels, as :func:`~speechlab.contract.words_from_tokens`)."""
        symbols = []
        for t in tokens:
            if self.model.spec.union_vocab:
                lang, j = self.model.union.to_local(int(t))
                symbols.append(self.tokenizers[lang].symbols[j] if lang is not None else "")
            else:
                lang = language if language is not None else self.languages[0]
                symbols.append(self.tokenizers[lang].symbols[int(t)])
        return words_from_tokens(symbols, times, self.frame_seconds,
                                 starts_word=lambda s: s.startswith(WORD_START),
                                 strip=lambda s: s.removeprefix(WORD_START), spans=spans)

    # -----------------------------------------------------------------------------------------
    # Loading and export

    @classmethod
    def from_run(cls, model_dir: str | Path, **kw: Any) -> RnntRecognizer:
        """A model of ``speechlab reproduce multisoftmax`` (``OUT/models/NAME``), with the
        tokenizers and CMVN statistics its run wrote to ``OUT/lang``."""
        model_dir = Path(model_dir)
        lang_dir = model_dir.parent.parent / "lang"
        model = load(model_dir)
        tokenizers = {lang: GraphemeTokenizer.load(lang_dir / f"{lang}.json")
                      for lang in model.languages}
        search = read_decoding(model_dir).get("search")  # as the run decoded it
        if search is not None:
            kw.setdefault("search", from_dict(SearchConfig, search))
        return cls(model, tokenizers, GlobalCMVN.load(lang_dir / "cmvn.safetensors"),
                   source=lang_dir, **kw)

    def _networks_to(self, device: torch.device) -> None:
        """The encoder on ``device`` (:meth:`RnntNetworks.encoder_on`); the search stays on
        the CPU."""
        if self.networks.backend != "torch":
            return
        self.networks = self.networks.encoder_on(device)

    def to_package(self) -> PackageParts:
        """The card, weights and side files of this recognizer's package."""
        self._needs_torch("export it")
        return self.package_parts(self.model, self._data())

    def to_onnx_package(self) -> PackageParts:
        """The card and side files of a package whose networks are ONNX graphs
        (:mod:`.onnx_graphs`): ``encoder.onnx``, ``predictor.onnx``, ``joiner.onnx``."""
        from speechlab.asr.rnnt.onnx_graphs import FILES, export_networks

        self._needs_torch("export it")
        graphs = export_networks(self.model)
        return self.package_parts(self.model, self._data(), onnx={
            role: (FILES[role], graph) for role, graph in graphs.items()})

    def onnx(self, threads: int = 1) -> RnntRecognizer:
        """This recognizer with its networks exported to ONNX graphs (in memory) and run by
        onnxruntime on ``threads`` threads; the searches are the same."""
        from speechlab.asr.rnnt.onnx_graphs import export_networks, onnx_networks

        if self.backend == "onnx":
            return self
        networks = onnx_networks(self.model, export_networks(self.model), threads)
        rec = RnntRecognizer(self.model, self.tokenizers, self.cmvn, self.fbank, self.search,
                             self.chunk_frames, networks=networks)
        rec.segment_seconds = self.segment_seconds
        rec.confidence_map = self.confidence_map
        return rec

    def _needs_torch(self, what: str) -> None:
        if self.backend != "torch":
            raise ConfigError(f"this recognizer runs ONNX graphs; to {what}, load the model "
                              "it was exported from (OUT/models/NAME or a PyTorch package)")

    def _data(self) -> dict[str, Any]:
        return {"tokenizers": {k: t.to_dict() for k, t in self.tokenizers.items()},
                "cmvn": self.cmvn.to_dict(),
                "fbank": to_dict(self.fbank), "search": to_dict(self.search),
                "variant": self.model.variant, "streaming": True, "lid_free": self.lid_free}

    @classmethod
    def from_package(cls, path: Path, card: PackageCard, model: torch.nn.Module | None
                     ) -> RnntRecognizer:
        """The recognizer of the package at ``path`` and its ``model``; None for an ONNX
        package (its graphs run in onnxruntime; the model is built on the meta device, to
        describe them)."""
        networks = None
        if model is None:
            from speechlab.asr.rnnt.onnx_graphs import FILES, onnx_networks

            with torch.device("meta"):
                model = card.build(BUILDERS, path)
            networks = onnx_networks(model, graph_files(path, card, list(FILES)))
        data = card.data
        tokenizers = {k: GraphemeTokenizer.from_dict(v, f"{path} tokenizer {k!r}")
                      for k, v in data["tokenizers"].items()}
        return cls(model, tokenizers, GlobalCMVN.from_dict(data["cmvn"]),
                   from_dict(FbankConfig, data["fbank"]), from_dict(SearchConfig, data["search"]),
                   source=path, networks=networks)


class RnntStream:
    """One recording streamed through an :class:`RnntRecognizer` (see
    :meth:`RnntRecognizer.stream`).

    An encoder whose streaming state grows with the audio (the causal Transformer keeps every
    past frame's keys and values, and each chunk attends to all of them) would make a long
    stream ever slower and larger, and would reach positions no training utterance had. Such a
    stream is decoded in *segments* of about
    ``rec.segment_seconds``: once a segment has three quarters of that, it ends at the first
    chunk boundary after a quiet chunk (mean log-mel energy in the segment's lowest fifth), at
    the latest at the full length; encoder and searches then start afresh. Texts and words are
    joined, word times counted from the start of the recording; LID-free, each segment picks
    its language, and the recording's ``lid`` is the frame-weighted average. The LSTM encoder's
    state is constant in size: its streams are one segment whatever their length.

    **Utterances.** ``is_endpoint`` says when the utterance being decoded has ended by one of
    the rules of :mod:`speechlab.endpoint`; trailing silence is the time since the best
    hypothesis last emitted a label. ``reset()`` closes the utterance, returns its
    :class:`Transcript` (its own language and LID, word times from the start of the recording,
    ``extra``: ``utterance`` k, ``start``, ``end``, ``endpoint`` the rule) and starts the next
    one afresh, encoder and searches, as a new segment. ``partial``, ``lid``, ``active`` and
    ``finish()`` speak of the utterance since the last reset (without resets: the recording).
    """

    def __init__(self, rec: RnntRecognizer, language: str | None, early_stop: EarlyStopConfig,
                 search: SearchConfig, endpoint: EndpointConfig | None = None,
                 languages: Sequence[str] | None = None) -> None:
        import kaldi_native_fbank as knf

        self.rec = rec
        self.language = language
        self._fbank = knf.OnlineFbank(knf_options(rec.fbank))
        self._cmvn = (rec.cmvn.mean.numpy(), rec.cmvn.std.numpy())
        self._taken = 0  # feature frames handed on so far
        self._buffer: list[np.ndarray] = []
        self.lid_free = language is None and rec.lid_free
        # the languages decoded LID-free: the model's, or an allowlist of them
        self.languages = tuple(languages) if languages is not None else tuple(rec.languages)
        self._early_stop, self._search = early_stop, search
        self.context: dict[str, ContextGraph] = {}  # hotwords by language (RnntRecognizer.stream)
        self._decoder = self._new_decoder()
        self._segments: list[Transcript] = []  # finished segments, word times absolute
        self._segment_start = 0  # feature frames before the current segment
        self._energy: list[float] = []  # per feature frame of the current segment
        self._closed = False  # the last segment is among _segments
        self._seconds = 0.0  # audio received
        self._finished: Transcript | None = None
        self.endpoint = endpoint or EndpointConfig()
        self.nbest = 0  # alternatives kept in each result (RnntRecognizer.stream)
        self._utterance_start = 0  # feature frames before the current utterance
        self._utterances = 0  # utterances closed by reset()
        self._last_label: float | None = None  # seconds: the utterance's last label's end

    def _new_decoder(self) -> Any:
        rec, model = self.rec, self.rec.model
        if self.lid_free:
            dec = LidFreeDecoder(rec.networks, DecodeConfig(search=self._search,
                                                            early_stop=self._early_stop),
                                 languages=self.languages)
            for i, language in enumerate(dec.languages):
                if language in self.context:
                    dec.search.bias(i, self.context[language])
                if language in rec.lms:
                    dec.search.fuse(i, rec.lms[language])
            return dec
        # a pooled model without a one-hot, or a mono model, needs no language; a model with
        # one output layer or one-hot per language does (its one language, if it has one)
        lang = (self.language or rec.languages[0]) if (
            model.spec.lang_onehot or model.spec.lang_output) else None
        decoder = StreamingDecoder(rec.networks, lang, self._search)
        graph = self.context.get(self.language or rec.languages[0])
        if graph is not None:
            decoder.search.bias(0, graph)
        lm = rec.lms.get(self.language or rec.languages[0])
        if lm is not None:
            decoder.search.fuse(0, lm)
        return decoder

    def accept_waveform(self, samples: Any, sample_rate: int = 16000) -> None:
        """Feed the next piece of the recording (mono samples at ``sample_rate``)."""
        if self._finished is not None:
            raise ConfigError("this stream is finished; start a new one")
        x = as_samples(samples, sample_rate, self.rec.sample_rate, what="stream audio")
        self._fbank.accept_waveform(float(self.rec.sample_rate), x)
        self._seconds += len(x) / self.rec.sample_rate
        self._advance(final=False)

    def _advance(self, final: bool) -> None:
        ready = self._fbank.num_frames_ready
        if ready > self._taken:
            # Copied out before pop(): get_frame's arrays view memory that pop() frees.
            self._buffer += [np.array(self._fbank.get_frame(i)) for i in range(self._taken, ready)]
            self._fbank.pop(ready - self._taken)
            self._taken = ready
        chunk = self.rec.chunk_frames
        while self._buffer and (len(self._buffer) >= chunk or final):
            take, self._buffer = self._buffer[:chunk], self._buffer[chunk:]
            full = self._segment_frames()
            if self._energy and len(self._energy) + len(take) > full:
                self._end_segment()  # this chunk would take the segment past its length
            raw = np.stack(take).astype(np.float32, copy=False)
            # the CMVN's (x - mean) / std, as its module computes it, without torch's dispatch
            mean, std = self._cmvn
            self._decoder.accept(torch.from_numpy((raw - mean) / std))
            self._energy += raw.mean(axis=1).tolist()
            if len(self._energy) >= 0.75 * full and np.mean(self._energy[-len(take):]) <= \
                    np.quantile(self._energy, 0.2):
                self._end_segment()  # a quiet chunk late in the segment: end it there

    def _segment_frames(self) -> float:
        """Feature frames a segment may hold (inf: one segment)."""
        limit = self.rec.segment_seconds
        return math.inf if limit is None else limit / self.rec.fbank.frame_shift

    def _end_segment(self, restart: bool = True) -> None:
        """The current segment's result kept; encoder and searches start afresh (unless this
        is the stream's end: ``active`` then still tells which decoders ran to it)."""
        if self._decoder.num_frames if self.lid_free else self._decoder.frames:
            self._last_label = self._live_last_label() or self._last_label
            self._segments.append(self._segment_result())
        self._closed = not restart
        if restart:
            self._segment_start += len(self._energy)
            self._energy = []
            self._decoder = self._new_decoder()

    def _segment_result(self) -> Transcript:
        offset = self._segment_start * self.rec.fbank.frame_shift
        if self.lid_free:
            r = self._decoder.finish()
            best = self._decoder.best(r.language)
            beam = self._decoder.beams[self._decoder.languages.index(r.language)]
            words, alts = self._confident(best, beam, r.language)
            return Transcript(self.rec.text(r.tokens, r.language), r.language,
                              dict(r.lid_posteriors), _shifted(words, offset),
                              extra={"active_frames": r.active_frames, "frames": r.num_frames,
                                     "start": offset}, nbest=alts)
        best = self._decoder.result()
        lang = self.language if self.language is not None else (
            self.rec.languages[0] if len(self.rec.languages) == 1 else None)
        if lang is None and self.rec.model.spec.union_vocab:
            lang = _union_language(self.rec, best.tokens)
        words, alts = self._confident(best, self._decoder.beams[0], self.language)
        return Transcript(self.rec.text(best.tokens, self.language), lang, None,
                          _shifted(words, offset),
                          extra={"frames": self._decoder.frames, "start": offset}, nbest=alts)

    def _confident(self, best: Any, beam: Any, language: str | None
                   ) -> tuple[tuple[Word, ...], tuple[tuple[str, float], ...]]:
        """The best hypothesis's words with their confidence, and the beam's distinct texts
        with their posteriors (:mod:`speechlab.confidence`: the beam's scores normalised over
        the hypotheses it kept). A word's raw confidence is its beam posterior times the
        geometric mean of its labels' probabilities where they were emitted
        (:func:`~speechlab.confidence.label_confidence`): a beam of a few hypotheses agrees on
        most words whatever the audio, the labels' own probabilities tell more."""
        hyps = list(beam.values())
        alts = alternatives([self.rec.text(h.tokens, language) for h in hyps],
                            [h.score for h in hyps])
        spans: list[tuple[int, int]] = []
        words = self.rec.words(best.tokens, best.times, language, spans)
        posteriors = word_confidences([w.word for w in words], alts)
        lps = best.label_log_probs
        conf = self.rec.calibrated([p * label_confidence(lps[a:b])
                                    for p, (a, b) in zip(posteriors, spans)])
        return (tuple(Word(w.word, w.start, w.end, c) for w, c in zip(words, conf)),
                tuple(alts))

    def _leading(self) -> str | None:
        """The language whose hypothesis is shown: the one decoded, or the LID head's lead."""
        if not self.lid_free:
            return self.language
        lid = self.lid or {}
        running = list(self.active) or list(self.languages)
        return max(running, key=lambda lang: lid.get(lang, 0.0))

    def _live_hyp(self) -> Any:
        if self.lid_free:
            return self._decoder.best(self._leading())
        return self._decoder.partial

    def _live_last_label(self) -> float | None:
        """Seconds from the recording's start to the end of the live segment's last label."""
        times = self._live_hyp().times
        if not times:
            return None
        start = self._segment_start * self.rec.fbank.frame_shift
        return start + (int(times[-1]) + 1) * self.rec.frame_seconds

    def _decoded_seconds(self) -> float:
        return (self._segment_start + len(self._energy)) * self.rec.fbank.frame_shift

    @property
    def endpoint_rule(self) -> str | None:
        """The endpoint rule that holds for the current utterance (None: none does)."""
        if self._finished is not None:
            return None
        start = self._utterance_start * self.rec.fbank.frame_shift
        now = self._decoded_seconds()
        last = (self._live_last_label() if not self._closed else None) or self._last_label
        has_text = last is not None
        return self.endpoint.rule(now - (last if has_text else start), now - start, has_text)

    @property
    def is_endpoint(self) -> bool:
        """Whether the current utterance has ended (:mod:`speechlab.endpoint`'s rules)."""
        return self.endpoint_rule is not None

    def reset(self) -> Transcript:
        """Close the current utterance: its transcript (class doc); the stream goes on with
        the next one from the audio decoded so far."""
        if self._finished is not None:
            raise ConfigError("this stream is finished; start a new one")
        rule = self.endpoint_rule
        start = self._utterance_start * self.rec.fbank.frame_shift
        end = self._decoded_seconds()
        self._end_segment(restart=True)
        result = self._combined(self._segments, end)
        result.extra.update(utterance=self._utterances, start=round(start, 3),
                            end=round(end, 3), endpoint=rule)
        self._utterances += 1
        self._segments = []
        self._utterance_start = self._segment_start
        self._last_label = None
        return result

    @property
    def active(self) -> tuple[str, ...]:
        """The languages whose decoders are still running (early stopping switches them off)."""
        if not self.lid_free:
            return (self.language or self.rec.languages[0],)
        on = self._decoder.stopper.on
        return tuple(lang for i, lang in enumerate(self.languages) if bool(on[i]))

    @property
    def lid(self) -> dict[str, float] | None:
        """The LID head's posteriors averaged over the frames so far (None without LID)."""
        if not self.lid_free:
            return None
        sums = {lang: 0.0 for lang in self.languages}
        frames = 0
        for seg in self._segments:
            n = seg.extra["frames"]
            frames += n
            for lang, p in (seg.lid or {}).items():
                sums[lang] += p * n
        if self._decoder.num_frames and not self._closed:  # the live segment
            frames += self._decoder.num_frames
            for i, lang in enumerate(self.languages):
                sums[lang] += float(self._decoder.posterior_sum[i])
        if frames == 0:
            return {lang: 1 / len(self.languages) for lang in self.languages}
        return {lang: v / frames for lang, v in sums.items()}

    @property
    def partial(self) -> str:
        """The best text so far (LID-free: of the language the LID head leads with)."""
        if self._finished is not None:
            return self._finished.text
        now = self.rec.text(self._live_hyp().tokens, self._leading())
        return " ".join(t for t in [*(seg.text for seg in self._segments), now] if t)

    @property
    def partial_words(self) -> tuple[Word, ...]:
        """The words of :attr:`partial`, times from the start of the recording, each with its
        confidence as the search stands now (as a final's: the beam posterior times the
        labels' probabilities, through the model's map): the closed segments' as they were,
        the live segment's from its best hypothesis and beam. A later chunk may still change
        the live words and their confidences; a word the beam disagrees on reads low."""
        if self._finished is not None:
            return self._finished.words or ()
        words = [w for seg in self._segments for w in seg.words or ()]
        if not self._closed:
            words += self._live_words()
        end = self._decoded_seconds()
        return tuple(Word(w.word, min(w.start, end), min(w.end, end), w.confidence)
                     for w in words)

    def _live_words(self) -> tuple[Word, ...]:
        """The live segment's best hypothesis's words with their confidences."""
        language = self._leading()
        if self.lid_free:
            best = self._decoder.best(language)
            beam = self._decoder.beams[self._decoder.languages.index(language)]
        else:
            best, beam = self._decoder.partial, self._decoder.beams[0]
        if not best.tokens:
            return ()
        words, _ = self._confident(best, beam, language)
        return _shifted(words, self._segment_start * self.rec.fbank.frame_shift)

    def finish(self) -> Transcript:
        """The whole recording recognized; the stream takes no more audio."""
        if self._finished is not None:
            return self._finished
        self._fbank.input_finished()
        self._advance(final=True)
        self._end_segment(restart=False)
        self._finished = self._combined(self._segments, self._seconds)
        if self._utterances:
            self._finished.extra.update(
                utterance=self._utterances,
                start=round(self._utterance_start * self.rec.fbank.frame_shift, 3),
                end=round(self._seconds, 3), endpoint=None)
        return self._finished

    def _combined(self, segments: list[Transcript], end: float) -> Transcript:
        """One transcript of ``segments`` (an utterance's, or the recording's), word times
        clipped at ``end`` seconds (an encoder frame spans several feature frames: the last
        may reach past the audio)."""
        text = " ".join(seg.text for seg in segments if seg.text)
        words = tuple(Word(w.word, min(w.start, end), min(w.end, end), w.confidence)
                      for seg in segments for w in seg.words or ())
        if self.lid_free:
            lid = self.lid
            if not segments:
                return Transcript("", None, lid, (), extra={})
            frames = sum(seg.extra["frames"] for seg in segments)
            active = {lang: sum(seg.extra["active_frames"][lang] for seg in segments)
                      for lang in self.languages}
            if len(segments) == 1:  # as the decoder gave them
                language, lid = segments[0].language, segments[0].lid
            else:
                language = max(lid, key=lid.get)
            return Transcript(text, language, lid, words, extra={
                "active_frames": active, "t_avg": sum(active.values()) / frames,
                "segment_starts": [seg.extra["start"] for seg in segments]},
                nbest=self._nbest(segments))
        # the given language, the model's one, or (pooled) the language most words had
        counts: dict[str, int] = {}
        for seg in segments:
            if seg.language is not None:
                counts[seg.language] = counts.get(seg.language, 0) + len(seg.words or ()) + 1
        language = self.language or (
            self.rec.languages[0] if len(self.rec.languages) == 1 else
            max(counts, key=counts.get) if counts else None)
        return Transcript(text, language, None, words, extra={
            "segment_starts": [seg.extra["start"] for seg in segments]},
            nbest=self._nbest(segments))

    def _nbest(self, segments: list[Transcript]) -> tuple[tuple[str, float], ...] | None:
        """The ``nbest`` alternatives asked for: a segment's beam (several segments: their
        best texts joined, with the product of their probabilities)."""
        if not self.nbest:
            return None
        if not segments:
            return (("", 1.0),)
        if len(segments) == 1:
            return (segments[0].nbest or ((segments[0].text, 1.0),))[: self.nbest]
        p = 1.0
        for seg in segments:
            p *= (seg.nbest or (("", 1.0),))[0][1]
        return ((" ".join(seg.text for seg in segments if seg.text), round(p, 4)),)


def _shifted(words: tuple[Word, ...], seconds: float) -> tuple[Word, ...]:
    return tuple(Word(w.word, w.start + seconds, w.end + seconds, w.confidence) for w in words)


def _union_language(rec: RnntRecognizer, tokens: tuple[int, ...]) -> str | None:
    """The language most of a pooled model's output labels belong to (None for no labels)."""
    counts: dict[str, int] = {}
    for t in tokens:
        lang, _ = rec.model.union.to_local(int(t))
        if lang is not None:
            counts[lang] = counts.get(lang, 0) + 1
    return max(counts, key=counts.get) if counts else None
