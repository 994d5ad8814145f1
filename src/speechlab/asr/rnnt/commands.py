"""``speechlab rnnt ...``: parameter counts and streaming decoding of trained models.

- ``speechlab rnnt params [--preset paper]``: the six variants' sizes next to Table 6.
- ``speechlab rnnt decode RUN_DIR MODEL WAV... [--language hi] [--chunk-ms 300] [--tau 30 --s-th 0.5]``:
  streams each file through a model trained by ``speechlab reproduce multisoftmax`` in chunks,
  printing partial hypotheses as they grow. A ``multisoftmax_lid`` model without
  ``--language`` runs every language's decoder in parallel and picks by the LID head.
  Options are checked before any model or audio is loaded, and every input file before the
  first is decoded. Inputs of :data:`LONG_INPUT_SECONDS` or more show progress while decoded
  (a bar on a terminal, a log line every 15 s otherwise, with the real-time factor); the
  real-time factor to expect is in docs/runtime.md.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING


from speechlab.config import FieldError, bounded, command_group
from speechlab.errors import ConfigError, DataError
from speechlab.progress import WorkProgress

if TYPE_CHECKING:
    from speechlab.asr.rnnt.config import DecodeConfig


def _params(args: argparse.Namespace) -> int:
    from speechlab.asr.rnnt.model import format_parameter_table, parameter_table

    print(format_parameter_table(parameter_table(args.preset)))
    return 0


# Inputs at least this long (seconds of audio) report progress while they are decoded.
LONG_INPUT_SECONDS = 30.0

# Option of `rnnt decode` -> the config field it sets (for error messages naming the option).
_OPTION_OF = {"beam": "--beam", "method": "--method", "tau": "--tau", "s_th": "--s-th"}


def decode_config(args: argparse.Namespace) -> DecodeConfig:
    """The decoding options of ``rnnt decode``, validated before any work is done."""
    from speechlab.asr.rnnt.config import DecodeConfig, EarlyStopConfig, SearchConfig

    if not (math.isfinite(args.chunk_ms) and args.chunk_ms > 0):
        raise ConfigError(f"--chunk-ms must be a positive number of milliseconds, got "
                          f"{args.chunk_ms}")
    try:
        return DecodeConfig(search=SearchConfig(method=args.method, beam=args.beam),
                            early_stop=EarlyStopConfig(tau=args.tau, s_th=args.s_th),
                            select="lid", chunk_frames=max(1, round(args.chunk_ms / 10)))
    except FieldError as e:
        raise ConfigError(f"{_OPTION_OF.get(e.key, e.key)} {e.reason}") from None


def check_run_dir(run: Path, model: str) -> Path:
    """The directory of ``model`` in a trained run, after checking that its checkpoint says it
    holds an RNN-T (a missing or foreign checkpoint names the file instead of failing
    mid-load)."""
    from speechlab.asr.rnnt.model import FAMILY
    from speechlab.train.card import best_or_latest, read_card

    if not run.is_dir():
        raise DataError(f"{run}: not a directory; give the output directory of a trained run")
    model_dir = run / "models" / model
    if not model_dir.is_dir():
        names = sorted(p.name for p in (run / "models").iterdir()) if (run / "models").is_dir() else []
        raise DataError(f"{model_dir}: no such model in {run}; models there: {names}")
    ckpt = best_or_latest(model_dir)
    card = read_card(ckpt)
    if card.family != FAMILY:
        raise DataError(f"{ckpt}: holds a {card.family!r} model, not an RNN-T; `rnnt decode` "
                        "decodes the models of `speechlab reproduce multisoftmax`")
    return model_dir


def token_lm(tokenizer, lines: list[str], order: int):
    """An n-gram LM of ``lines`` spelled in ``tokenizer``'s tokens (graphemes, word starts
    marked), for shallow fusion into that language's RNN-T search; and how many lines were
    left out (characters outside the tokenizer's inventory)."""
    from speechlab.text.ngram import NgramConfig, estimate

    sentences, skipped = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            ids = tokenizer.encode(line)
        except DataError:
            skipped += 1
            continue
        sentences.append([tokenizer.symbols[i] for i in ids])
    if not sentences:
        raise DataError(f"no line of the text is spelled in the {tokenizer.language} tokens "
                        f"({skipped} lines have characters outside them)")
    return estimate(sentences, NgramConfig(order=order)), skipped


def _lm(args: argparse.Namespace) -> int:
    from speechlab.asr.rnnt.model import FAMILY
    from speechlab.asr.rnnt.recognizer import RnntRecognizer
    from speechlab.families import builders
    from speechlab.package import is_package, load_network, read_card
    from speechlab.shipped import resolve

    path = resolve(args.model)
    card = read_card(path) if path.is_dir() and is_package(path) else None
    if card is None or card.family != FAMILY:
        raise ConfigError(f"{args.model}: not an RNN-T package (speechlab export makes one of a "
                          "trained model)")
    network = load_network(path, card, builders()) if card.backend == "torch" else None
    model = RnntRecognizer.from_package(path, card, network)
    if "lm_fusion" not in model.capabilities:
        raise ConfigError(f"{args.model}: LM fusion is for an RNN-T with a softmax per "
                          f"language; this {model.model.variant} model pools its labels")
    tokenizers = model.tokenizers
    language = args.language or (model.languages[0] if len(model.languages) == 1 else None)
    if language not in tokenizers:
        raise ConfigError(f"--language: give one of {', '.join(model.languages)}")
    try:
        lines = args.text.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise DataError(f"{args.text} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    lm, skipped = token_lm(tokenizers[language], lines, args.order)
    lm.write(args.out)
    print(f"{args.out}: a {args.order}-gram LM of {len(lines) - skipped} lines in {language} "
          f"tokens ({skipped} left out: characters outside the model's)")
    return 0


def _decode(args: argparse.Namespace) -> int:
    from speechlab.asr.rnnt.model import load
    from speechlab.asr.rnnt.recognizer import RnntRecognizer
    from speechlab.audio.features import FbankConfig
    from speechlab.audio.io import load_audio, validate_audio_file
    from speechlab.audio.transforms import GlobalCMVN
    from speechlab.text.graphemes import GraphemeTokenizer

    cfg = decode_config(args)
    run: Path = args.run_dir
    model_dir = check_run_dir(run, args.model)
    for wav in args.wavs:  # every input is checked before the first is decoded
        validate_audio_file(wav, expected_sr=16000)
    model = load(model_dir)
    if args.language is not None and args.language not in model.languages:
        raise DataError(f"--language {args.language!r}: model {args.model!r} knows "
                        f"{list(model.languages)}")
    tokenizers = {lang: GraphemeTokenizer.load(run / "lang" / f"{lang}.json") for lang in model.languages}
    for lang, size in zip(model.languages, model.vocab_sizes):
        if len(tokenizers[lang]) != size:
            raise DataError(f"{run / 'lang' / f'{lang}.json'}: {len(tokenizers[lang])} symbols, "
                            f"but model {args.model!r} has {size} for {lang!r}; it was trained "
                            "with another tokenizer")
    cmvn = GlobalCMVN.load(run / "lang" / "cmvn.safetensors")
    if cmvn.mean.shape[0] != FbankConfig().num_mel_bins:
        raise DataError(f"{run / 'lang' / 'cmvn.safetensors'}: statistics of "
                        f"{cmvn.mean.shape[0]}-dim features, the model reads "
                        f"{FbankConfig().num_mel_bins}-dim fbank")
    # The recognizer streams as `speechlab transcribe` does (long inputs of a growing encoder
    # in segments); this command adds the per-chunk partials and the LID-free statistics.
    rec = RnntRecognizer(model, tokenizers, cmvn, search=cfg.search,
                         chunk_frames=cfg.chunk_frames, source=run / "lang")
    step = cfg.chunk_frames * round(rec.sample_rate * rec.fbank.frame_shift)
    for wav in args.wavs:
        audio = load_audio(wav, expected_sr=16000)
        if len(audio) < rec.sample_rate * rec.fbank.frame_length_ms / 1000:
            raise DataError(f"{wav}: no audio frames to decode")
        seconds = len(audio) / rec.sample_rate
        progress = WorkProgress(f"decoding {wav}", seconds,
                                enabled=seconds >= LONG_INPUT_SECONDS and not args.partials)
        stream = rec.stream(args.language, tau=cfg.early_stop.tau, s_th=cfg.early_stop.s_th)
        start = time.process_time()
        with progress:
            for i in range(0, len(audio), step):
                stream.accept_waveform(audio[i: i + step], rec.sample_rate)
                progress.update(min(i + step, len(audio)) / rec.sample_rate)
                if args.partials:
                    active = f"  (decoders: {', '.join(stream.active)})" if stream.lid_free else ""
                    print(f"  [{min(i + step, len(audio)) / rec.sample_rate:6.2f}s] "
                          f"{stream.partial}{active}")
            r = stream.finish()
        cpu = time.process_time() - start
        if stream.lid_free:
            post = ", ".join(f"{k} {v:.2f}" for k, v in (r.lid or {}).items())
            print(f"{wav}\t{r.language}\t{r.text}\t(LID {post}; T_avg {r.extra['t_avg']:.2f}; "
                  f"CPU {cpu * 1000:.0f} ms)")
        else:
            print(f"{wav}\t{r.language or '-'}\t{r.text}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    rsub = command_group(sub, "rnnt", "multi-softmax RNN-T: parameter counts, streaming decoding")

    q = rsub.add_parser("params", help="parameter counts of the six variants vs. Table 6")
    q.add_argument("--preset", default="paper")
    q.set_defaults(func=_params)

    m = rsub.add_parser("lm", help="a token n-gram LM of a text for shallow fusion "
                        "(speechlab transcribe --lm)")
    m.add_argument("model", type=Path, metavar="MODEL", help="the RNN-T whose tokens it spells")
    m.add_argument("text", type=Path, help="UTF-8 text, one sentence per line")
    m.add_argument("--language", default=None, help="the language of the text (a model of "
                   "several languages)")
    m.add_argument("--order", type=bounded(int, ge=1, le=10, why="token LMs use 3-8"), default=6)
    m.add_argument("--out", type=Path, required=True, help="the ARPA file to write")
    m.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    m.set_defaults(func=_lm, outputs={"out": "file"})

    d = rsub.add_parser("decode", help="stream audio files through a trained model")
    d.add_argument("run_dir", type=Path, help="output dir of `speechlab reproduce multisoftmax`")
    d.add_argument("model", help="model name under RUN_DIR/models, e.g. multisoftmax_lid, mono_hi")
    d.add_argument("wavs", nargs="+", type=Path)
    d.add_argument("--language", default=None, help="spoken language (omit for LID-free decoding)")
    d.add_argument("--chunk-ms", type=float, default=300.0, help="streaming chunk length")
    d.add_argument("--method", default="beam", help="greedy | beam | modified_beam")
    d.add_argument("--beam", type=int, default=4)
    d.add_argument("--tau", type=float, default=math.inf, help="early stopping: frames before switching off")
    d.add_argument("--s-th", dest="s_th", type=float, default=math.inf, help="early stopping margin")
    d.add_argument("--partials", action="store_true", help="print partial hypotheses per chunk")
    d.set_defaults(func=_decode)
