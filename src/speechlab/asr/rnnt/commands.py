"""``speechlab rnnt ...``: parameter counts and streaming decoding of trained models.

- ``speechlab rnnt params [--preset paper]``: the six variants' sizes next to Table 6.
- ``speechlab rnnt decode RUN_DIR MODEL WAV... [--language hi] [--chunk-ms 300] [--tau 30 --s-th 0.5]``:
  streams each file through a model trained by ``speechlab reproduce multisoftmax`` in chunks,
  printing partial hypotheses as they grow. A ``multisoftmax_lid`` model without
  ``--language`` runs every language's decoder in parallel and picks by the LID head.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch


def _params(args: argparse.Namespace) -> int:
    from speechlab.asr.rnnt.model import format_parameter_table, parameter_table

    print(format_parameter_table(parameter_table(args.preset)))
    return 0


def _decode(args: argparse.Namespace) -> int:
    from speechlab.asr.rnnt.config import DecodeConfig, EarlyStopConfig, SearchConfig
    from speechlab.asr.rnnt.multilingual_decode import LidFreeDecoder
    from speechlab.asr.rnnt.reproduce import load_trained
    from speechlab.asr.rnnt.search import StreamingDecoder
    from speechlab.audio.features import fbank
    from speechlab.audio.io import load_audio
    from speechlab.audio.transforms import GlobalCMVN
    from speechlab.errors import DataError
    from speechlab.text.graphemes import GraphemeTokenizer

    run: Path = args.run_dir
    model = load_trained(run / "models" / args.model)
    tokenizers = {lang: GraphemeTokenizer.load(run / "lang" / f"{lang}.json") for lang in model.languages}
    cmvn = GlobalCMVN.load(run / "lang" / "cmvn.safetensors")
    search = SearchConfig(method=args.method, beam=args.beam)
    chunk = max(1, round(args.chunk_ms / 10))

    def text(tokens, lang):
        if model.spec.union_vocab:
            from speechlab.asr.rnnt.reproduce import _text_of

            return _text_of(model, tokens, None, tokenizers)
        return tokenizers[lang].decode(tokens)

    for wav in args.wavs:
        feats = torch.from_numpy(fbank(load_audio(wav, expected_sr=16000)))
        feats = cmvn(feats[None], torch.tensor([feats.shape[0]]))[0][0]
        if feats.shape[0] == 0:
            raise DataError(f"{wav}: no audio frames to decode")
        lid_free = model.spec.lang_output and args.language is None
        if lid_free:
            dec = LidFreeDecoder(model, DecodeConfig(search=search, early_stop=EarlyStopConfig(
                tau=args.tau, s_th=args.s_th), select="lid"))
            for i in range(0, feats.shape[0], chunk):
                partial = dec.accept(feats[i : i + chunk])
                if args.partials:
                    shown = " | ".join(f"{k}: {text(v, k)}" for k, v in partial.items())
                    print(f"  [{(i + chunk) / 100:6.2f}s] {shown}")
            r = dec.finish()
            post = ", ".join(f"{k} {v:.2f}" for k, v in r.lid_posteriors.items())
            print(f"{wav}\t{r.language}\t{text(r.tokens, r.language)}\t(LID {post}; T_avg {r.t_avg:.2f}; "
                  f"CPU {r.cpu_seconds * 1000:.0f} ms)")
        else:
            lang = args.language if not model.spec.single_language else model.languages[0]
            dec = StreamingDecoder(model, None if model.spec.union_vocab else lang, search)
            for i in range(0, feats.shape[0], chunk):
                partial = dec.accept(feats[i : i + chunk])
                if args.partials:
                    print(f"  [{(i + chunk) / 100:6.2f}s] {text(partial, lang)}")
            print(f"{wav}\t{lang or '-'}\t{text(dec.result().tokens, lang)}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rnnt", help="multi-softmax RNN-T: parameter counts, streaming decoding")
    rsub = p.add_subparsers(dest="rnnt_command", metavar="ACTION", required=True)

    q = rsub.add_parser("params", help="parameter counts of the six variants vs. Table 6")
    q.add_argument("--preset", default="paper")
    q.set_defaults(func=_params)

    d = rsub.add_parser("decode", help="stream audio files through a trained model")
    d.add_argument("run_dir", type=Path, help="output dir of `speechlab reproduce multisoftmax`")
    d.add_argument("model", help="model name under RUN_DIR/models, e.g. multisoftmax_lid, mono_hi")
    d.add_argument("wavs", nargs="+", type=Path)
    d.add_argument("--language", default=None, help="spoken language (omit for LID-free decoding)")
    d.add_argument("--chunk-ms", type=float, default=300.0, help="streaming chunk length")
    d.add_argument("--method", default="beam", help="greedy | beam")
    d.add_argument("--beam", type=int, default=4)
    d.add_argument("--tau", type=float, default=math.inf, help="early stopping: frames before switching off")
    d.add_argument("--s-th", dest="s_th", type=float, default=math.inf, help="early stopping margin")
    d.add_argument("--partials", action="store_true", help="print partial hypotheses per chunk")
    d.set_defaults(func=_decode)
