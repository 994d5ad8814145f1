"""One way to use any trained model: :func:`load` and :func:`export`.

``speechlab.load(path)`` gives back, for any of

- an exported package (``speechlab export``: ``speechlab.json`` + ``model.safetensors``),
- a model directory of a reproduction (``OUT/models/NAME``, its run's side files beside it),
- a Hugging Face wav2vec 2.0 directory (``Wav2Vec2ForCTC`` with ``vocab.json``; or
  ``Wav2Vec2ForPreTraining`` / ``Wav2Vec2Model``, for diagnosis),
- a fairseq wav2vec 2.0 checkpoint file (a fine-tuned one with its ``dict.ltr.txt`` beside),

an object of the kind it is: an ASR model with ``transcribe(audio, sample_rate, language)``
(and, for the streaming RNN-T family, ``stream()``), a TTS model with ``synthesize(text=...,
labels=...)``, or a wav2vec 2.0 encoder to diagnose (``kind`` says which: ``asr``, ``tts``,
``ssl``). Each family's library does the work (:mod:`speechlab.asr.rnnt.recognizer`,
:mod:`speechlab.asr.ctc.recognizer`, :mod:`speechlab.ssl.wav2vec2.recognizer`,
:mod:`speechlab.tts.synthesis`); this module, above them all, only finds out which family a path
holds. Nothing is ever unpickled: packages and Hugging Face directories hold safetensors,
speechlab checkpoints are read with ``weights_only=True``, fairseq files by an inert unpickler.

``export(model, out)`` writes any of them as a self-contained package; with
``format="onnx"`` (``speechlab export --format onnx``) the networks of the streaming RNN-T
(LSTM or causal Transformer encoder) and of the TTS acoustic models (SALAD, RNN) are written
as ONNX graphs instead of PyTorch weights.

Backends: ``load(path, backend=...)`` runs the networks in PyTorch (``"torch"``) or with
onnxruntime (``"onnx"``), behind the same ``transcribe`` / ``stream`` / ``synthesize``. By
default a package runs with the backend it was exported for; ``backend="onnx"`` on a PyTorch
package or a model directory exports the graphs in memory first (the families
:func:`export` writes as ONNX); ``backend="torch"`` on an ONNX package is refused (it holds no
PyTorch weights).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from speechlab.contract import (
    Model,
    Recognizer,
    Transcript,
    Word,
    as_recognizer,
    as_synthesizer,
    recognition_options,
)
from speechlab.devices import add_device_options
from speechlab.endpoint import EndpointConfig
from speechlab.errors import ConfigError, DataError, SpeechlabError
from speechlab.families import builders, family, openers
from speechlab.package import CARD_NAME, is_package, load_network, read_card, write_package

BACKENDS = ("torch", "onnx")
#: what ``--format onnx`` / ``backend="onnx"`` takes (for the error that refuses the others)
ONNX_MODELS = ("the streaming RNN-T (multi-softmax family, LSTM or causal Transformer "
               "encoder)", "the CTC-topology models", "the wav2vec 2.0 CTC models",
               "the TTS acoustic models (SALAD, RNN)")

LOOKED_FOR = ("a speechlab package (speechlab.json), a trained model directory (best.pt or "
              "ckpt-*.pt, e.g. OUT/models/NAME), a Hugging Face wav2vec 2.0 directory "
              "(config.json with model.safetensors or pytorch_model.bin) or a fairseq "
              "checkpoint file")


def load(path: str | Path, *, backend: str | None = None, device: Any = None) -> Model:
    """The model at ``path`` (module doc), ready to use, in eval mode, its networks run by
    ``backend`` (None: a package's own, else ``"torch"``) on ``device`` (None: the CPU; a
    name :mod:`speechlab.devices` takes, e.g. ``"cuda"``: the networks there, the searches on
    the CPU). What it returns keeps the contract of its kind (:mod:`speechlab.contract`);
    :func:`~speechlab.contract.as_recognizer` and :func:`~speechlab.contract.as_synthesizer`
    narrow it."""
    if backend is not None and backend not in BACKENDS:
        raise ConfigError(f"backend {backend!r}: choose one of {list(BACKENDS)}")
    model = _load(path, backend)
    return model if device is None else model.to(device)


def _load(path: str | Path, backend: str | None) -> Model:
    from speechlab.shipped import resolve

    path = resolve(path)  # a shipped model's name, or a path
    if path.is_dir() and is_package(path):
        card = read_card(path)
        if card.backend == "onnx" and backend == "torch":
            raise ConfigError(f"{path} is an ONNX package (speechlab export --format onnx): it "
                              "holds no PyTorch weights; load it with backend='onnx' (or "
                              "export the model again without --format onnx)")
        cls = family(card.family, path).runtime_class()
        network = None  # an ONNX package: its graphs hold the weights
        if card.backend == "torch":
            network = _network(card, path)
        try:
            loaded: Model = cls.from_package(path, card, network)
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"{path}: the card's data is incomplete ({e}); export the "
                            "model again") from None
        if "confidence_map" in card.data:
            from speechlab.confidence import ConfidenceMap

            loaded.confidence_map = ConfidenceMap.from_json(card.data["confidence_map"],
                                                            path / CARD_NAME)
        return _on(loaded, backend, path)
    return _on(_load_torch(path), backend, path)


def _network(card: Any, path: Path) -> Any:
    """The package's network, its card checked against its weights before it is built
    (:func:`speechlab.package.load_network`)."""
    return load_network(path, card, builders())


#: The ONNX operators ``export --int8`` quantizes.
QUANTIZED_OPS = ("MatMul", "Gemm", "LSTM")


def quantized(graph: bytes) -> bytes:
    """An ONNX graph with its weights quantized to int8 (dynamic quantization)."""
    import logging
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        src.write_bytes(graph)
        # The quantizer logs a line per operator it leaves (and advice) on the root logger:
        # dozens of lines for one package, none about the user's input.
        root.setLevel(logging.ERROR)
        try:
            # the matrix products (and LSTMs) only: quantizing the convolutions' inputs as
            # they run costs more than int8 saves there (benchmarks/onnx_int8.py)
            quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8,
                             op_types_to_quantize=list(QUANTIZED_OPS))
        finally:
            root.setLevel(level)
        return dst.read_bytes()


def _lean(card: Any, weights: Any, files: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """A package's parts made small (:func:`export`'s ``lean``)."""
    from dataclasses import replace

    if weights is not None:
        weights = {k: v.half() if v.is_floating_point() else v for k, v in weights.items()}
    dropped = {card.files[role] for role in card.data.get("rebuildable", ()) if role in card.files}
    kept = {n: c for n, c in files.items() if n not in dropped}
    # n-gram LMs go gzip-compressed (ARPA text shrinks 3-4x; the readers tell it by its
    # first bytes, so a package exported again from a lean one is not compressed twice)
    renamed: dict[str, str] = {}
    for name in [n for n in kept if n.endswith(".arpa")]:
        import gzip

        from speechlab.text.ngram import GZIP_MAGIC

        content = kept.pop(name)
        raw = content if isinstance(content, bytes) else Path(content).read_bytes()
        if raw[:2] != GZIP_MAGIC:
            raw = gzip.compress(raw, compresslevel=9, mtime=0)
        renamed[name] = name + ".gz"
        kept[name + ".gz"] = raw
    files_of = {r: renamed.get(n, n) for r, n in card.files.items() if n not in dropped}
    card = replace(card, files=files_of, data={**card.data, "lean": True})
    return card, weights, kept


def _on(model: Model, backend: str | None, source: Path) -> Model:
    """``model`` with its networks run by ``backend`` (None: as it is)."""
    if backend != "onnx" or model.backend == "onnx":
        return model
    if "onnx" not in model.capabilities:
        raise ConfigError(f"{source}: {model.title} does not run on onnxruntime; "
                          f"backend='onnx' takes {' and '.join(ONNX_MODELS)}")
    return model.onnx()  # the family's onnx() keeps the confidence map


def _load_torch(path: Path) -> Model:
    """A model that is not a package (module doc), its networks in PyTorch."""
    if not path.exists():
        from speechlab.shipped import shipped

        names = sorted(shipped())
        raise DataError(f"{path} does not exist; give {LOOKED_FOR}"
                        + (f", or a shipped model's name ({', '.join(names)})" if names else ""))
    for opener in openers():  # other toolkits' formats (Hugging Face, fairseq)
        model: Model | None = opener(path)
        if model is not None:
            return model
    if path.is_dir():
        if (path / "best.pt").is_file() or any(path.glob("ckpt-*.pt")):
            return _run_model(path)
        if (path / "models").is_dir():
            names = sorted(p.name for p in (path / "models").iterdir() if p.is_dir())
            raise DataError(f"{path} is a run directory; give one of its models, "
                            f"{path / 'models'}/NAME (NAME: {', '.join(names) or 'none yet'})")
    raise DataError(f"{path}: not a model speechlab can load; looked for {LOOKED_FOR}")


def _run_model(model_dir: Path) -> Model:
    from speechlab.train.card import best_or_latest
    from speechlab.train.card import read_card as read_model_card

    name = read_model_card(best_or_latest(model_dir)).family
    loaded: Model = family(name, model_dir).runtime_class().from_run(model_dir)
    return loaded


FORMATS = ("torch", "onnx")


def export(model: str | Path, out: str | Path, *, overwrite: bool = False,
           format: str = "torch", lean: bool = False, int8: bool = False,
           word_lm: str | Path | None = None) -> Path:
    """Write the model at ``model`` (anything :func:`load` takes) as a self-contained package
    at ``out``: the card, the weights as safetensors (``format="onnx"``: the networks as ONNX
    graphs instead, for the models of :data:`ONNX_MODELS`), the side files it needs, and, for
    a model of a reproduction, its run's test results and the command that made them.

    ``lean`` (the shipped models): the weights kept as float16 (loaded back as float32) and
    the side files the family can rebuild at load left out (``card.data["rebuildable"]``: a
    CTC model's decoding graph, rebuilt from its lexicon and LM and cached).

    ``int8`` (with ``format="onnx"``): every ONNX graph quantized dynamically (onnxruntime's
    ``quantize_dynamic``: int8 weights of its matrix products, activations quantized as they
    run), for a smaller package and a faster CPU.

    ``word_lm`` (a CTC-topology model): the package decodes with this word n-gram LM instead
    of the run's (``use_word_lm``: its words the lexicon lacks pronounced and added); the card
    names the file and its SHA-256."""
    from importlib.metadata import version

    if format not in FORMATS:
        raise ConfigError(f"--format {format!r}: choose one of {list(FORMATS)}")
    if int8 and format != "onnx":
        raise ConfigError("--int8 quantizes ONNX graphs: give it with --format onnx")
    source = Path(model)
    if is_package(source) and read_card(source).backend == "onnx":
        raise ConfigError(f"{source} is an ONNX package; export from the model it was made "
                          "from (OUT/models/NAME or a PyTorch package)")
    # A run still training may replace the checkpoint while it is read: the card must name
    # the one whose weights were loaded, so they are read until it stays the same.
    trained = _trained_checkpoint(source)
    for _ in range(3):
        obj = load(source)
        now = _trained_checkpoint(source)
        if now == trained:
            break
        trained = now
    else:
        raise DataError(f"{source}: its checkpoint was replaced each time it was read (a run "
                        "is training into it and saving often); export again")
    if word_lm is not None:
        if "word_lm" not in obj.capabilities:
            raise ConfigError(f"--word-lm: {obj.title} decodes with no word LM of yours (a "
                              "CTC-topology model does)")
        as_recognizer(obj, str(source)).use_word_lm(word_lm)
    if format == "onnx":
        if "onnx" not in obj.capabilities:
            raise ConfigError(f"{source}: {obj.title} does not export to ONNX; --format onnx "
                              f"takes {' and '.join(ONNX_MODELS)}")
        card, weights, files = obj.to_onnx_package()
        if int8:
            from dataclasses import replace as replaced

            files = {name: quantized(content) if name.endswith(".onnx") else content
                     for name, content in files.items()}
            card = replaced(card, data={**card.data, "int8": True})
    else:
        card, weights, files = obj.to_package()
    if lean:
        card, weights, files = _lean(card, weights, files)
    made_by: dict[str, Any] = {"source": str(source), "speechlab": version("speechlab")}
    if word_lm is not None:
        import hashlib

        from speechlab.text.ngram import arpa_bytes

        made_by["word_lm"] = {"file": Path(word_lm).name,
                              "sha256": hashlib.sha256(arpa_bytes(word_lm)).hexdigest()}
    results: dict[str, Any] = {}
    run = source.parent.parent if source.is_dir() else None
    if run is not None and (run / "results.json").is_file():
        try:
            res = json.loads((run / "results.json").read_text(encoding="utf-8"))
            results = {"title": res.get("title"), "scale": res.get("scale"),
                       "tables": res.get("tables", [])}
            meta = res.get("meta") or {}
            made_by["command"] = meta.get("command")
            made_by["git_commit"] = meta.get("git_commit")
            made_by["run"] = str(run)
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            pass  # a run without readable results still exports its model
    elif run is not None:
        # A run still training: the commands and commits that started and resumed this model
        # (not the run's other models), and whether this model's training has ended.
        from speechlab.report.results import invocations_for
        from speechlab.train.checkpoint import training_ended

        calls = invocations_for(run, source.name)
        if calls:
            made_by["command"] = calls[-1]["command"]
            made_by["git_commit"] = calls[-1]["git_commit"]
            made_by["run"] = str(run)
            made_by["invocations"] = calls
            ended = training_ended(source)
            if ended is None:
                made_by["unfinished"] = True
            else:
                made_by["training_ended"] = ended
    made_by.update({k: v for k, v in trained.items() if k != "file"})
    from dataclasses import replace

    card = replace(card, results=results or card.results, made_by={**card.made_by, **made_by})
    return write_package(out, card, weights, files, overwrite=overwrite)


def _trained_checkpoint(source: Path) -> dict[str, Any]:
    """What the card says of the checkpoint a run's model directory loads from (empty for
    anything else): its name and time, the update, whether its weights are the run's moving
    average, the decoding settings its run chose; ``file`` tells one file from another (a run
    replacing it between two calls gives two different answers)."""
    if not source.is_dir() or is_package(source):
        return {}
    from speechlab.train.card import best_or_latest, read_decoding
    from speechlab.train.checkpoint import checkpoint_summary

    out: dict[str, Any] = {}
    tuned = {k: v for k, v in read_decoding(source).items() if isinstance(v, (int, float, str))}
    if tuned:  # what the model decodes with: chosen on dev by the run's decode step
        out["decoding"] = tuned
    try:
        chosen = best_or_latest(source)
        st = chosen.stat()
        out["file"] = (chosen.name, st.st_ino, st.st_mtime_ns, st.st_size)
        out["checkpoint"] = chosen.name
        out["checkpoint_utc"] = _utc(st.st_mtime)
        facts = checkpoint_summary(chosen)
    except (OSError, SpeechlabError):
        return out
    if "step" in facts:
        out["step"] = facts["step"]
    if "average_updates" in facts:  # the weights are the run's moving average
        out["weights"] = {"ema_decay": facts["ema_decay"],
                          "average_updates": facts["average_updates"]}
    return out


def _utc(seconds: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(
        timespec="seconds")


# ---------------------------------------------------------------------------------------------
# Commands: speechlab transcribe, speechlab export

# Inputs at least this long (seconds of audio) report progress while they are transcribed.
LONG_INPUT_SECONDS = 30.0


def _fuse_lms(model: Recognizer, specs: list[str] | None, weight: float,
              bonus: float = 0.0) -> None:
    """``--lm [LANG=]ARPA`` (repeatable) fused into the model's searches with ``--lm-weight``
    and ``--lm-bonus``."""
    for spec in specs or []:
        if "lm_fusion" not in model.capabilities:
            raise ConfigError(f"--lm: {model.title} takes no token LM (shallow fusion is for the "
                              "RNN-T with a softmax per language)")
        language, sep, arpa = spec.partition("=")
        if not sep:
            if len(model.languages) != 1:
                raise ConfigError(f"--lm {spec}: this model decodes "
                                  f"{', '.join(model.languages)}; say which with LANG=ARPA")
            language, arpa = model.languages[0], spec
        model.use_lm(language, Path(arpa), weight, bonus)


def _run_transcribe(args: Any) -> int:
    import sys

    from speechlab.audio.chunks import audio_seconds
    from speechlab.audio.io import validate_audio_file
    from speechlab.progress import WorkProgress

    model = as_recognizer(load(args.model, backend=args.backend, device=args.device),
                          args.model)
    opts = recognition_options(model, language=args.language, method=args.method,
                               beam=args.beam, tau=args.tau, s_th=args.s_th,
                               languages=args.languages, nbest=args.nbest,
                               hotwords=args.hotwords, hotword_score=args.hotword_score,
                               flag="--")
    language = opts.pop("language")
    _fuse_lms(model, args.lm, args.lm_weight, args.lm_bonus)
    if args.word_lm is not None:
        model.use_word_lm(args.word_lm)
    if args.stream and args.vad:
        raise ConfigError("--vad cuts whole files; a stream (--stream) ends its utterances by "
                          "the endpoint rules instead: give one of them")
    for wav in args.wavs:  # every input is checked before the first is decoded
        validate_audio_file(wav, expected_sr=None, channels=None)
    for wav in args.wavs:
        seconds = audio_seconds(wav, model.sample_rate)
        progress = WorkProgress(f"transcribing {wav}", seconds,
                                enabled=seconds >= LONG_INPUT_SECONDS and not args.stream)
        with progress:
            if args.stream:
                for result in _stream_file(model, wav, args, opts):
                    _print_result(wav, result, args.json)
            elif args.vad:
                _print_result(wav, transcribe_speech(model, wav, language=language,
                                                     vad=_vad_config(args),
                                                     progress=progress.update, **opts),
                              args.json)
            else:
                _print_result(wav, model.transcribe(wav, language=language,
                                                    progress=progress.update, **opts), args.json)
        sys.stdout.flush()
    return 0


def _vad_config(args: Any) -> Any:
    from speechlab.audio.vad import VadConfig

    return VadConfig(engine=args.vad_engine)


def transcribe_speech(model: Recognizer, audio: Any, sample_rate: int = 16000,
                      vad: Any = None, progress: Any = None, **options: Any) -> Transcript:
    """``audio`` (a path, or mono samples at ``sample_rate``) cut into its speech by voice
    activity detection (:mod:`speechlab.audio.vad`, ``vad`` its
    :class:`~speechlab.audio.vad.VadConfig`) and each piece transcribed by ``model`` (any
    recognizer, ``options`` as its ``transcribe`` takes them): silence never reaches the
    search. The texts are joined; word times count from the start of the audio;
    ``extra["segments"]`` lists each piece's start, end, text and language (and its n-best,
    asked with ``nbest``: the alternatives are a piece's, as a stream's are an utterance's);
    the language is the one most pieces had."""
    from speechlab.audio.io import as_samples, load_audio
    from speechlab.audio.vad import SAMPLE_RATE, VadConfig, speech_segments

    if isinstance(audio, (str, Path)):
        import soundfile as sf

        audio, sample_rate = load_audio(audio, None), sf.info(str(audio)).samplerate
    x = as_samples(audio, sample_rate, SAMPLE_RATE)
    pieces = []
    for start, end in speech_segments(x, vad or VadConfig()):
        r = model.transcribe(x[int(start * SAMPLE_RATE):int(end * SAMPLE_RATE)], SAMPLE_RATE,
                             **options)
        pieces.append((start, end, r))
        if progress is not None:
            progress(end)
    words = None if any(r.words is None for _, _, r in pieces) else tuple(
        Word(w.word, w.start + start, w.end + start, w.confidence) for start, _, r in pieces for w in r.words or ())
    languages = [r.language for _, _, r in pieces if r.text and r.language]
    language = max(set(languages), key=languages.count) if languages else (
        options.get("language") or (model.languages[0] if len(model.languages) == 1 else None))
    return Transcript(" ".join(r.text for _, _, r in pieces if r.text), language, None, words,
                      extra={"segments": [_segment(s, e, r) for s, e, r in pieces]})


def _segment(start: float, end: float, piece: Transcript) -> dict[str, Any]:
    """One voice-activity piece of :func:`transcribe_speech` as ``extra["segments"]`` lists it."""
    out: dict[str, Any] = {"start": start, "end": end, "text": piece.text,
                           "language": piece.language}
    if piece.nbest is not None:
        out["nbest"] = piece.nbest_json()
    return out


def _print_result(wav: Path, result: Transcript, as_json: bool) -> None:
    """One line: ``WAV<TAB>LANGUAGE<TAB>TEXT``, or the JSON object (with ``segment``,
    ``start`` and ``end`` for an utterance of a stream)."""
    if as_json:
        out = result.to_json(str(wav))
        if "utterance" in result.extra:
            out.update(segment=result.extra["utterance"], start=result.extra["start"],
                       end=result.extra["end"])
        if "segments" in result.extra:
            out["segments"] = result.extra["segments"]
        print(json.dumps(out, ensure_ascii=False), flush=True)
    else:
        print(f"{wav}\t{result.language or '-'}\t{result.text}", flush=True)


def _stream_file(model: Recognizer, wav: Path, args: Any, opts: dict[str, Any]
                 ) -> Iterator[Transcript]:
    """A file fed to a stream in ``--chunk-ms`` pieces, partial results printed as they change
    (to stderr when stdout carries JSON); each utterance's transcript as an endpoint ends it
    (the ``--silence-*`` / ``--max-utterance`` rules), and the last one's at the end. A model
    that reads whole recordings gets its utterances cut by voice activity
    (:class:`speechlab.streaming.VadStream`) and no partial results."""
    import sys

    from speechlab.audio.chunks import iter_blocks

    if not (args.chunk_ms > 0 and args.chunk_ms == args.chunk_ms):
        raise ConfigError(f"--chunk-ms must be a positive number of milliseconds, got "
                          f"{args.chunk_ms}")
    endpoint = EndpointConfig.from_options(vars(args), flag="--")
    stream: Any
    if "stream" in model.capabilities:
        stream = model.stream(args.language, **opts, endpoint=endpoint)
    else:  # a model that reads whole recordings: utterances cut by voice activity
        from speechlab.streaming import VadStream

        stream = VadStream(lambda x: model.transcribe(x, 16000, args.language, **opts),
                           endpoint, vad=_vad_config(args), languages=model.languages)
    out = sys.stderr if args.json else sys.stdout
    shown = ""
    utterances = 0
    for offset, piece in iter_blocks(wav, model.sample_rate, model.sample_rate,
                                     args.chunk_ms / 1000):
        stream.accept_waveform(piece, model.sample_rate)
        if stream.partial != shown:
            shown = stream.partial
            active = ",".join(stream.active)
            print(f"  [{offset + len(piece) / model.sample_rate:7.2f}s] ({active}) {shown}",
                  file=out, flush=True)
        if stream.is_endpoint:
            utterances += 1
            shown = ""
            yield stream.reset()
    last = stream.finish()
    if last.text or not utterances:
        yield last


def _run_synth(args: Any) -> int:
    import io
    import shlex

    import numpy as np
    import soundfile as sf

    from speechlab.files import atomic_path

    if (args.labels is None) == (args.text is None):
        raise ConfigError("synth: give either a LABELS file or --text, not both")
    if args.text is not None and not args.text.strip():
        raise DataError("synth: --text is empty")
    if args.labels is not None and not Path(args.labels).exists():
        said = str(args.labels)
        raise DataError(f"synth: no labels file {said!r}" + (
            f"; to speak text, give it with --text: speechlab synth {args.model} --text "
            f"{shlex.quote(said)} --out {shlex.quote(str(args.out))}"
            if " " in said.strip() or not Path(said).suffix else ""))
    model = as_synthesizer(load(args.model, backend=args.backend, device=args.device),
                           args.model)
    speech = model.synthesize(text=args.text, labels=args.labels,
                              window=args.window or None)
    if not np.isfinite(speech.waveform).all():
        raise DataError(f"{args.model}: the vocoder gave non-finite samples (the model's "
                        "normalizers are broken?); retrain the model")
    buf = io.BytesIO()
    sf.write(buf, speech.waveform, speech.sample_rate, subtype="PCM_16", format="WAV")
    with atomic_path(args.out) as tmp:
        tmp.write_bytes(buf.getvalue())
    print(f"{args.out}: {len(speech.waveform) / speech.sample_rate:.2f} s")
    return 0


def _run_export(args: Any) -> int:
    out = export(args.model, args.out, overwrite=args.overwrite, format=args.format,
                 int8=args.int8, word_lm=args.word_lm)
    card = read_card(out)
    print(f"{out}: {card.kind} model, family {card.family}, languages "
          f"{', '.join(card.languages) or '-'}, backend {card.backend}")
    return 0


def add_commands(sub: Any) -> None:
    from speechlab.config import bounded

    t = sub.add_parser(
        "transcribe", help="transcribe audio files with any speech recognizer speechlab loads",
        description="Transcribe audio files with a trained model: a package (speechlab "
        "export), a model directory of a run (OUT/models/NAME), a Hugging Face wav2vec 2.0 "
        "CTC directory or a fairseq checkpoint. Files of any length: read a block at a time, "
        "progress shown for long ones.")
    t.add_argument("model", type=Path, metavar="PATH")
    t.add_argument("wavs", nargs="+", type=Path, metavar="WAV")
    t.add_argument("--language", default=None,
                   help="the spoken language (default: the model's, or found by its LID head)")
    t.add_argument("--languages", default=None, metavar="L1,L2",
                   help="an allowlist for a model with a LID head: only these languages' "
                        "decoders run and the LID head chooses among them")
    t.add_argument("--hotwords", default=None, metavar="W1,W2",
                   help="words or phrases to bias the search towards (the RNN-T with a softmax "
                        "per language, the CTC-topology models), comma-separated")
    t.add_argument("--hotword-score", default=None, metavar="S",
                   help="the bonus per grapheme (RNN-T) or per word (CTC, natural log) of a "
                        "hotword (default 2)")
    t.add_argument("--nbest", type=int, default=None, metavar="N",
                   help="with --json: the N most probable distinct texts with their "
                        "posteriors (nbest; with --vad, each segment's), and each word's "
                        "confidence")
    t.add_argument("--json", action="store_true",
                   help="one JSON object per file: file, text, language, lid, words")
    t.add_argument("--stream", action="store_true",
                   help="stream the file in --chunk-ms pieces, printing partial results and a "
                        "line per utterance (a model that reads whole recordings: utterances "
                        "cut by voice activity)")
    t.add_argument("--chunk-ms", type=float, default=320.0, help="streaming piece length")
    t.add_argument("--vad", action="store_true",
                   help="cut each file into its speech by voice activity detection (Silero "
                        "VAD) and transcribe the pieces; --json lists them as segments")
    t.add_argument("--vad-engine", choices=("silero", "webrtc"), default="silero",
                   help="the detector of --vad and of a whole-recording model's --stream: "
                        "silero (a network) or webrtc (WebRTC's, far cheaper, coarser)")
    defaults = EndpointConfig()
    for name, what in (("silence_before_text", "of silence with nothing recognized yet"),
                       ("silence_after_text", "of silence after some text"),
                       ("max_utterance", "of one utterance at most")):
        t.add_argument("--" + name.replace("_", "-"), default=None, metavar="S",
                       help=f"--stream: an utterance ends after S seconds {what} (default "
                            f"{getattr(defaults, name):g}; inf: never); one line per utterance")
    t.add_argument("--backend", choices=BACKENDS, default=None,
                   help="run the networks in PyTorch or onnxruntime (default: the package's "
                        "own, else torch; onnx exports a PyTorch model's graphs in memory)")
    t.add_argument("--beam", type=int, default=None, help="search beam (model's default)")
    t.add_argument("--method", default=None,
                   help="search: beam/greedy/modified_beam (RNN-T), viterbi/prefix (CTC "
                        "topologies), greedy/lm (wav2vec 2.0)")
    add_device_options(t, precision=False)
    t.add_argument("--lm", action="append", default=None, metavar="[LANG=]ARPA",
                   help="RNN-T: fuse a token n-gram LM (speechlab rnnt lm makes one) into the "
                        "search of LANG (repeatable; LANG may be left out for a one-language "
                        "model)")
    t.add_argument("--word-lm", dest="word_lm", type=Path, default=None, metavar="ARPA",
                   help="CTC topologies: decode with this word n-gram LM (speechlab ctc lm makes "
                        "one) instead of the model's own; its words the lexicon lacks are "
                        "pronounced, and the graph is built again (cached)")
    t.add_argument("--lm-weight", type=bounded(float, gt=0, le=10), default=0.3, metavar="W",
                   help="the fused LM's weight (default 0.3)")
    t.add_argument("--lm-bonus", type=bounded(float, ge=-10, le=10), default=0.0, metavar="B",
                   help="score added per label with --lm: gives back the length the LM's "
                        "negative log-probabilities take (default 0; tune it with the weight)")
    t.add_argument("--tau", type=float, default=None,
                   help="early stopping (RNN-T LID-free): encoder frames before decoders switch off")
    t.add_argument("--s-th", dest="s_th", type=float, default=None,
                   help="early stopping margin below the best LID score")
    t.set_defaults(func=_run_transcribe)

    s = sub.add_parser("synth", help="speech from text or HTS labels with any TTS model "
                       "speechlab loads (a package, or OUT/models/NAME of 'reproduce salad')")
    s.add_argument("model", type=Path, metavar="PATH")
    s.add_argument("labels", type=Path, nargs="?", default=None,
                   help="phone-aligned HTS full-context labels (start end context)")
    s.add_argument("--text", default=None, help="text to speak through festival's front end")
    s.add_argument("--out", type=Path, required=True, help="output wav (16 kHz)")
    s.add_argument("--window", type=bounded(int, ge=0), default=120,
                   help="SALAD: attend within windows of this many frames (0: whole utterance)")
    s.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    s.add_argument("--backend", choices=BACKENDS, default=None,
                   help="run the acoustic model in PyTorch or onnxruntime (default: the "
                        "package's own, else torch)")
    add_device_options(s, precision=False)
    s.set_defaults(func=_run_synth, outputs={"out": "file"})

    e = sub.add_parser("export", help="write a trained model as a self-contained package",
                       description="Write a trained model (anything speechlab transcribe or "
                       "synth takes) as a package directory: speechlab.json (its card), "
                       "model.safetensors, and the side files it needs (decoding graph, LM, "
                       "question set), with its run's test results and the command that made "
                       "them. `speechlab.load(PKG)` reads it with nothing else.")
    e.add_argument("model", type=Path, metavar="MODEL")
    e.add_argument("--out", type=Path, required=True, help="the package directory to write")
    e.add_argument("--format", choices=FORMATS, default="torch",
                   help="torch: PyTorch weights (safetensors); onnx: the networks as ONNX "
                        "graphs run by onnxruntime (the streaming RNN-T, the CTC-topology and "
                        "wav2vec 2.0 CTC models, the TTS acoustic models)")
    e.add_argument("--int8", action="store_true",
                   help="with --format onnx: quantize the graphs' weights to int8 (dynamic "
                        "quantization): a smaller package, a faster CPU")
    e.add_argument("--word-lm", dest="word_lm", type=Path, default=None, metavar="ARPA",
                   help="a CTC-topology model: the package decodes with this word n-gram LM "
                        "instead of its run's (speechlab ctc lm and lm-mix make one; its new "
                        "words pronounced and added to the lexicon)")
    e.add_argument("--overwrite", action="store_true", help="replace an existing package")
    e.set_defaults(func=_run_export, outputs={"out": "dir"})
