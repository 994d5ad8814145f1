"""wav2vec 2.0 models as a user meets them: a fine-tuned CTC model that transcribes
(:class:`Wav2Vec2Recognizer`: greedy CTC, or CTC beam search with a word n-gram LM), and a
pre-trained encoder to diagnose (:class:`Wav2Vec2Encoder`).

Both come from speechlab's own run directories and packages, and from Hugging Face
directories on disk (``Wav2Vec2ForCTC`` with its ``vocab.json``, ``tokenizer_config.json`` and
``preprocessor_config.json``; ``Wav2Vec2ForPreTraining`` / ``Wav2Vec2Model`` for diagnosis) and
fairseq checkpoints (:mod:`.checkpoint_import`, which never runs pickled code).

A CTC head's ids read as text through :class:`CtcLabels`: speechlab's grapheme tokenizer
(``B_`` symbols start words) or a Hugging Face vocabulary, decoded exactly as transformers'
``Wav2Vec2CTCTokenizer`` decodes greedy ids (repeats grouped, the pad token as blank, ``|`` as
the space, lower-cased or cleaned up where its tokenizer config says). ``do_normalize`` in the
preprocessor config makes each recording zero-mean, unit-variance before the model, as
transformers' feature extractor does. Long recordings are cut near every ``max_seconds`` at
their quietest moment; word times come from the frames (20 ms) of each word's labels on the
greedy path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from speechlab.audio.chunks import iter_pieces
from speechlab.audio.io import as_samples
from speechlab.confidence import alternatives, frame_confidence
from speechlab.ssl.wav2vec2.onnx_graphs import FILE, OnnxWav2Vec2CTC, export_network
from speechlab.contract import ModelBase, PackageParts, Transcript, Word
from speechlab.devices import device_of
from speechlab.errors import ConfigError, DataError
from speechlab.package import PackageCard
from speechlab.ssl.wav2vec2.model import CTC_FAMILY, FAMILY, Wav2Vec2, Wav2Vec2CTC
from speechlab.text.graphemes import WORD_START, GraphemeTokenizer
from speechlab.train.card import read_decoding

SAMPLE_RATE = 16000


def normalize_waveform(samples: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance (transformers' ``zero_mean_unit_var_norm``, eps 1e-7)."""
    x = samples.astype(np.float32)
    return ((x - x.mean()) / np.sqrt(x.var() + 1e-7)).astype(np.float32)


@dataclass(frozen=True)
class CtcLabels:
    """How a CTC head's ids read: ``symbols[id]`` its string, ``blank`` the CTC blank's id.
    ``delimiter``: the symbol that stands for a space (Hugging Face ``|``), or None when words
    start with ``B_`` symbols (speechlab's graphemes). ``lower``, ``clean_up``: the Hugging Face
    tokenizer's ``do_lower_case`` and ``clean_up_tokenization_spaces``."""

    symbols: tuple[str, ...]
    blank: int = 0
    delimiter: str | None = None
    unk: str = "<unk>"
    lower: bool = False
    clean_up: bool = False
    # The tokenizer's special tokens (<s>, </s>, <unk>): left out of the text, as transformers'
    # pipelines leave them (skip_special_tokens), but only after repeats are grouped, so that
    # one between two equal letters keeps them apart as CTC reads them (transformers drops
    # them, and the pad, first: "l <pad> l" would read "l").
    special: tuple[str, ...] = ()

    @classmethod
    def of_tokenizer(cls, tokenizer: GraphemeTokenizer) -> CtcLabels:
        return cls(tuple(tokenizer.symbols), 0, None)

    def to_json(self) -> dict[str, Any]:
        return {"symbols": list(self.symbols), "blank": self.blank, "delimiter": self.delimiter,
                "unk": self.unk, "lower": self.lower, "clean_up": self.clean_up,
                "special": list(self.special)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CtcLabels:
        return cls(tuple(d["symbols"]), int(d["blank"]), d["delimiter"], d["unk"],
                   bool(d["lower"]), bool(d["clean_up"]), tuple(d.get("special", ())))

    def _symbol(self, i: int) -> str:
        return self.symbols[i] if 0 <= i < len(self.symbols) else self.unk

    def spans(self, path: Sequence[int]) -> list[tuple[str, int, int]]:
        """The greedy path (one id per frame) as (symbol, first frame, end frame): repeats
        grouped, blanks dropped."""
        out: list[tuple[str, int, int]] = []
        start = 0
        for t in range(1, len(path) + 1):
            if t == len(path) or path[t] != path[start]:
                if path[start] != self.blank:
                    out.append((self._symbol(int(path[start])), start, t))
                start = t
        return out

    def text(self, path: Sequence[int]) -> str:
        """Text of a greedy path."""
        if self.delimiter is None:
            return _join_graphemes([s for s, _, _ in self.spans(path)])
        # transformers groups equal neighbouring strings before it drops the pad (blank) token
        strings = [self._symbol(int(i)) for i in path]
        grouped = [s for k, s in enumerate(strings) if k == 0 or strings[k - 1] != s]
        pad = self.symbols[self.blank]
        text = " ".join("".join(" " if s == self.delimiter else s for s in grouped
                                if s != pad and s not in self.special).split())
        if self.lower:
            text = text.lower()
        if self.clean_up:
            text = _clean_up(text)
        return text

    def words(self, path: Sequence[int], frame_seconds: float, offset: float = 0.0
              ) -> list[Word]:
        words: list[Word] = []
        cur, start, end = "", 0, 0
        for sym, a, b in self.spans(path):
            boundary = (sym == self.delimiter) if self.delimiter is not None \
                else sym.startswith(WORD_START)
            if boundary and cur:
                words.append(Word(cur, offset + start * frame_seconds, offset + end * frame_seconds))
                cur = ""
            if (self.delimiter is not None and sym == self.delimiter) or sym in self.special:
                continue
            if not cur:
                start = a
            cur += sym.removeprefix(WORD_START) if self.delimiter is None else sym
            end = b
        if cur:
            words.append(Word(cur, offset + start * frame_seconds, offset + end * frame_seconds))
        if self.lower:
            words = [Word(w.word.lower(), w.start, w.end, w.confidence) for w in words]
        return words


def _join_graphemes(symbols: Sequence[str]) -> str:
    from speechlab.text.graphemes import join_symbols

    return join_symbols(symbols)


def _clean_up(text: str) -> str:
    """transformers' ``clean_up_tokenization``."""
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                 (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text


class Wav2Vec2Encoder(ModelBase):
    """A pre-trained wav2vec 2.0 (or the encoder of a CTC model): what ``speechlab diagnose
    attention`` reads."""

    kind = "ssl"
    family = FAMILY
    title = "a wav2vec 2.0 encoder"
    CAPABILITIES = frozenset({"attention"})
    languages: tuple[str, ...] = ()

    def __init__(self, model: Wav2Vec2, *, normalize: bool = False) -> None:
        self.model = model.eval()
        self.normalize = normalize
        self.sample_rate = SAMPLE_RATE

    def waveform(self, audio: Any, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
        """(S,) the model's input for ``audio``: 16 kHz, normalized if the model wants it."""
        x = as_samples(audio, sample_rate, SAMPLE_RATE)
        return torch.from_numpy(normalize_waveform(x) if self.normalize else x)

    def to_package(self) -> PackageParts:
        return self.package_parts(self.model, {"normalize": self.normalize, "streaming": False})

    @classmethod
    def from_package(cls, path: Path, card: PackageCard, model: torch.nn.Module
                     ) -> Wav2Vec2Encoder:
        return cls(model, normalize=bool(card.data.get("normalize", False)))

    @classmethod
    def from_run(cls, model_dir: str | Path) -> Wav2Vec2Encoder:
        """The pre-trained model of a reproduction (``OUT/models/NAME``)."""
        from speechlab.ssl.wav2vec2.model import load as load_w2v

        return cls(load_w2v(model_dir))


class Wav2Vec2Recognizer(ModelBase):
    """A wav2vec 2.0 CTC model with its labels; optionally a word n-gram LM (ARPA) for the CTC
    beam search (speechlab grapheme labels only) at ``lm_weight`` and ``beam``."""

    kind = "asr"
    streaming = False
    family = CTC_FAMILY
    title = "a wav2vec 2.0 CTC model"
    CAPABILITIES = frozenset({"transcribe", "attention", "onnx"})

    def __init__(self, model: Wav2Vec2CTC, labels: CtcLabels, *, normalize: bool = False,
                 language: str = "en", arpa: Path | None = None, lm_weight: float = 0.5,
                 beam: int = 50, max_seconds: float = 30.0,
                 tokenizer: GraphemeTokenizer | None = None, source: object = "model") -> None:
        if model.head.out_features != len(labels.symbols):
            raise DataError(f"{source}: the CTC head has {model.head.out_features} outputs, the "
                            f"vocabulary {len(labels.symbols)} symbols")
        self.model = model.eval()
        self.labels = labels
        self.normalize = normalize
        self.languages = (language,)
        self.arpa = arpa
        self.lm_weight = lm_weight
        self.beam = beam
        self.max_seconds = max_seconds
        self.tokenizer = tokenizer
        self.sample_rate = SAMPLE_RATE
        self.frame_seconds = float(np.prod(model.encoder.config.conv_strides)) / SAMPLE_RATE
        self.source = source
        self._encoder = Wav2Vec2Encoder(model.encoder, normalize=normalize)

    @property
    def backend(self) -> str:
        """What runs the network: ``"torch"`` or ``"onnx"``."""
        return "onnx" if isinstance(self.model, OnnxWav2Vec2CTC) else "torch"

    @property
    def capabilities(self) -> frozenset[str]:
        """The attention diagnosis reads the PyTorch encoder: not on onnxruntime."""
        return self.CAPABILITIES - ({"attention"} if self.backend == "onnx" else set())

    @property
    def encoder(self) -> Wav2Vec2Encoder:  # type: ignore[override]
        """The wav2vec 2.0 encoder inside (what the attention diagnosis reads)."""
        if self.backend == "onnx":
            raise ConfigError("this model runs an ONNX graph; the attention diagnosis reads "
                              "the PyTorch model it was exported from")
        return self._encoder

    def onnx(self, threads: int = 1) -> Wav2Vec2Recognizer:
        """This recognizer with its network exported to an ONNX graph (in memory) and run by
        onnxruntime on ``threads`` threads; the decoding is the same."""
        if self.backend == "onnx":
            return self
        network = OnnxWav2Vec2CTC(export_network(self.model), self.model.config, threads)
        return self._with(network)

    def _with(self, network: Any) -> Wav2Vec2Recognizer:
        rec = Wav2Vec2Recognizer(network, self.labels, normalize=self.normalize,
                                 language=self.languages[0], arpa=self.arpa,
                                 lm_weight=self.lm_weight, beam=self.beam,
                                 max_seconds=self.max_seconds, tokenizer=self.tokenizer,
                                 source=self.source)
        rec.confidence_map = self.confidence_map
        return rec

    def _needs_torch(self) -> None:
        if self.backend != "torch":
            raise ConfigError("this recognizer runs an ONNX graph; to export it, load the model "
                              "it was exported from (OUT/models/NAME or a PyTorch package)")

    @property
    def methods(self) -> tuple[str, ...]:  # type: ignore[override]
        """Greedy CTC; a beam search with the word LM too when the model has one."""
        return ("greedy", "lm") if self.arpa and self.tokenizer else ("greedy",)

    def log_probs(self, samples: np.ndarray) -> np.ndarray:
        """(T, V) CTC log-probabilities of one piece of 16 kHz audio."""
        if len(samples) < self.model.encoder.config.receptive_field:
            return np.zeros((0, len(self.labels.symbols)), np.float32)
        x = normalize_waveform(samples) if self.normalize else samples
        with torch.inference_mode():
            lp, _ = self.model(torch.from_numpy(x)[None].to(device_of(self.model)))
        return lp[0].float().cpu().numpy()

    def _networks_to(self, device: torch.device) -> None:
        """The network on ``device``; the CTC search stays on the CPU."""
        if self.backend == "onnx":
            return
        self.model.to(device)

    def transcribe(self, audio: Any, sample_rate: int = SAMPLE_RATE, language: str | None = None,
                   *, method: str | None = None, beam: int | None = None, nbest: int = 0,
                   progress: Callable[[float], None] | None = None) -> Transcript:
        """``audio`` (a path, or mono samples at ``sample_rate``) -> its :class:`Transcript`:
        ``greedy`` CTC (default, with word times, each word's confidence the geometric mean of
        its frames' probabilities of the labels emitted there) or ``lm`` beam search with the
        model's n-gram LM; ``progress`` is called with the seconds of audio done after each
        piece. ``nbest`` > 0: that many distinct texts with their posteriors (greedy decoding
        has one; the LM search, its final beam normalised)."""
        if language is not None and language not in self.languages:
            raise ConfigError(f"language {language!r}: this model knows {list(self.languages)}")
        method = method or "greedy"
        if method not in ("greedy", "lm"):
            raise ConfigError(f"method {method!r}: choose greedy or lm")
        if method == "lm" and (self.arpa is None or self.tokenizer is None):
            raise ConfigError("this model has no n-gram LM to search with; use method=greedy")
        texts: list[str] = []
        words: list[Word] = []
        ranked: list[list[tuple[str, float]]] = []
        for offset, piece in iter_pieces(audio, sample_rate, SAMPLE_RATE, self.max_seconds):
            lp = self.log_probs(piece)
            if progress is not None:
                progress(offset + len(piece) / SAMPLE_RATE)
            if not len(lp):
                continue
            if method == "greedy":
                path = lp.argmax(-1)
                texts.append(self.labels.text(path.tolist()))
                chosen = np.exp(np.take_along_axis(np.asarray(lp), path[:, None], 1)[:, 0])
                for w in self.labels.words(path.tolist(), self.frame_seconds, offset):
                    a = int(round((w.start - offset) / self.frame_seconds))
                    b = max(a + 1, int(round((w.end - offset) / self.frame_seconds)))
                    (c,) = self.calibrated([frame_confidence(chosen[a:b])])
                    words.append(Word(w.word, w.start, w.end, c))
                ranked.append([(texts[-1], 1.0)])
            else:
                if nbest:  # the text stays the search's best; the beam gives the rest
                    found = self._lm_decoder(beam).ranked(lp)
                    texts.append(found[0][0] if found else "")
                    ranked.append(alternatives([t for t, _ in found], [s for _, s in found]))
                else:
                    texts.append(self._lm_decoder(beam)(lp))
        top: tuple[tuple[str, float], ...] | None = None
        if nbest:
            text = " ".join(t for t in texts if t)
            if len(ranked) == 1 and ranked[0]:
                top = tuple(ranked[0][:nbest])
            else:
                p = 1.0
                for alts in ranked:
                    p *= alts[0][1] if alts else 1.0
                top = ((text, round(p, 4)),)
        return Transcript(" ".join(t for t in texts if t), self.languages[0], None,
                          tuple(words) if method == "greedy" else None, nbest=top)

    def _lm_decoder(self, beam: int | None):
        from speechlab.ssl.wav2vec2.decode import LmBeamDecoder
        from speechlab.text.ngram import read_arpa

        key = beam or self.beam
        cache = self.__dict__.setdefault("_decoders", {})
        if key not in cache:
            if "_lm" not in self.__dict__:
                self._lm = read_arpa(self.arpa)
            cache[key] = LmBeamDecoder(self._lm, self.tokenizer, key, lm_weight=self.lm_weight)
        return cache[key]

    # -----------------------------------------------------------------------------------------
    # Loading and export

    @classmethod
    def from_run(cls, model_dir: str | Path, **kw: Any) -> Wav2Vec2Recognizer:
        """A fine-tune of ``speechlab reproduce local-attention`` with its run's grapheme
        tokenizer and LM, at the LM weight its decoding chose on dev."""
        from speechlab.ssl.wav2vec2.model import load

        model_dir = Path(model_dir)
        run = model_dir.parent.parent
        model = load(model_dir)
        if not isinstance(model, Wav2Vec2CTC):
            raise DataError(f"{model_dir}: a pre-trained wav2vec 2.0 model, not fine-tuned with "
                            "CTC: it cannot transcribe (diagnose it instead)")
        tokenizer = GraphemeTokenizer.load(run / "lang" / "en.json")
        arpa = run / "lang" / "en.arpa"
        settings = read_decoding(model_dir)
        return cls(model, CtcLabels.of_tokenizer(tokenizer), tokenizer=tokenizer,
                   arpa=arpa if arpa.is_file() else None,
                   lm_weight=float(settings.get("lm_weight", 0.5)),
                   beam=int(settings.get("beam", 50)), source=model_dir, **kw)

    @classmethod
    def from_hf(cls, directory: Path, model: Wav2Vec2CTC, **kw: Any) -> Wav2Vec2Recognizer:
        """A Hugging Face ``Wav2Vec2ForCTC`` directory (its model already loaded)."""
        labels = hf_labels(directory)
        return cls(model, labels, normalize=hf_normalize(directory), source=directory, **kw)

    def to_package(self) -> PackageParts:
        self._needs_torch()
        return self.package_parts(self.model, *self._data_and_files())

    def to_onnx_package(self) -> PackageParts:
        """The package with the network as an ONNX graph (``acoustic.onnx``) beside the same
        labels, tokenizer and LM."""
        self._needs_torch()
        return self.package_parts(self.model, *self._data_and_files(),
                                  onnx={"acoustic": (FILE, export_network(self.model))})

    def _data_and_files(self) -> tuple[dict[str, Any], dict[str, tuple[str, Any]]]:
        data: dict[str, Any] = {"labels": self.labels.to_json(), "normalize": self.normalize,
                                "lm_weight": self.lm_weight, "beam": self.beam,
                                "streaming": False,
                                "methods": ["greedy"] + (["lm"] if self.arpa else [])}
        files: dict[str, tuple[str, Any]] = {}
        if self.tokenizer is not None:
            data["tokenizer"] = self.tokenizer.to_dict()
        if self.arpa is not None and self.tokenizer is not None:
            files["lm"] = ("lm.arpa", self.arpa)
        return data, files

    @classmethod
    def from_package(cls, path: Path, card: PackageCard, model: torch.nn.Module | None
                     ) -> Wav2Vec2Recognizer:
        """The recognizer of the package at ``path`` and its ``model``; None for an ONNX
        package (its ``acoustic.onnx`` runs in onnxruntime)."""
        if model is None:
            from speechlab.config import from_dict
            from speechlab.package import graph_files
            from speechlab.ssl.wav2vec2.model import CtcConfig

            model = OnnxWav2Vec2CTC(  # type: ignore[assignment]
                graph_files(path, card, ["acoustic"])["acoustic"],
                from_dict(CtcConfig, dict(card.config)), source=path)
        d = card.data
        tokenizer = (GraphemeTokenizer.from_dict(d["tokenizer"], f"{path} tokenizer")
                     if "tokenizer" in d else None)
        return cls(model, CtcLabels.from_json(d["labels"]), normalize=bool(d["normalize"]),
                   language=card.languages[0] if card.languages else "en",
                   arpa=path / card.files["lm"] if "lm" in card.files else None,
                   lm_weight=float(d["lm_weight"]), beam=int(d["beam"]),
                   tokenizer=tokenizer, source=path)


# ---------------------------------------------------------------------------------------------
# Hugging Face side files


def _read_json(path: Path, default: Any = None) -> Any:
    if not path.is_file():
        return default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: not valid JSON ({e})") from None


def hf_normalize(directory: Path) -> bool:
    """``do_normalize`` of the directory's ``preprocessor_config.json`` (transformers' default
    for wav2vec 2.0: True), after checking its sampling rate."""
    from speechlab.ssl.wav2vec2.checkpoint_import import wants_normalized

    return wants_normalized(directory)


def hf_labels(directory: Path) -> CtcLabels:
    """The CTC labels of a Hugging Face ``Wav2Vec2CTCTokenizer`` directory (``vocab.json``,
    ``tokenizer_config.json``, ``special_tokens_map.json``, ``added_tokens.json``)."""
    vocab = _read_json(directory / "vocab.json")
    if vocab is None:
        raise DataError(f"{directory}: a Wav2Vec2ForCTC directory needs vocab.json (the CTC "
                        "labels); save the processor or tokenizer beside the model")
    if isinstance(vocab, dict) and vocab and all(isinstance(v, dict) for v in vocab.values()):
        if len(vocab) != 1:  # a multilingual tokenizer keeps one vocabulary per language
            raise DataError(f"{directory / 'vocab.json'}: {len(vocab)} vocabularies (one per "
                            "language); speechlab reads one")
        vocab = next(iter(vocab.values()))
    if not isinstance(vocab, dict) or not all(isinstance(v, int) for v in vocab.values()):
        raise DataError(f"{directory / 'vocab.json'}: expected {{token: id}}")
    added = _read_json(directory / "added_tokens.json", {}) or {}
    tokens = {**vocab, **{k: v for k, v in added.items() if isinstance(v, int)}}
    size = max(tokens.values()) + 1
    symbols = ["<unk>"] * size
    for tok, i in tokens.items():
        symbols[i] = tok
    config = _read_json(directory / "tokenizer_config.json", {}) or {}
    special = _read_json(directory / "special_tokens_map.json", {}) or {}

    def token(name: str, default: str) -> str:
        value = config.get(name, special.get(name, default))
        return value.get("content", default) if isinstance(value, dict) else str(value)

    pad = token("pad_token", "<pad>")
    model_cfg = _read_json(directory / "config.json", {}) or {}
    blank = vocab.get(pad, model_cfg.get("pad_token_id", 0))
    delimiter = token("word_delimiter_token", "|")
    specials = {token(name, default) for name, default in (("bos_token", "<s>"),
                                                            ("eos_token", "</s>"),
                                                            ("unk_token", "<unk>"))}
    specials |= {t for t in added if isinstance(t, str) and t.startswith("<") and t.endswith(">")}
    return CtcLabels(tuple(symbols), int(blank), delimiter,
                     token("unk_token", "<unk>"), bool(config.get("do_lower_case", False)),
                     bool(config.get("clean_up_tokenization_spaces", False)),
                     tuple(sorted(t for t in specials if t in tokens and t not in (pad, delimiter))))
