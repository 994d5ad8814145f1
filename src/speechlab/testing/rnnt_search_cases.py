"""Fixed RNN-T search cases on held-out audio, to hold every rewrite of the search to the
hypotheses of the search before it.

:func:`cases` builds seeded models of every variant (the ``ci`` LSTM and ``fast`` Transformer
encoders; output layers sharpened so that labels are emitted) and reads the dev and test
utterances of the tiny embedded corpus; :func:`hypotheses` decodes each utterance greedily and with a beam,
with the language given, and LID-free with and without early stopping. ``python -m
speechlab.testing.rnnt_search_cases OUT.json`` records them; ``tests/asr/rnnt`` compares.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import torch

VARIANTS = ("mono", "vanilla", "onehot", "multisoftmax", "multisoftmax_lsp", "multisoftmax_lid")
PRESETS = ("ci", "fast")
LANGUAGES = ("en", "hi")
SEARCHES = (("greedy", 1, 2), ("beam", 3, 2))
EARLY_STOPS = ((math.inf, math.inf), (3.0, 0.1))


def _features(corpus: Path) -> list[tuple[str, str, torch.Tensor]]:
    from lhotse import CutSet

    from speechlab.audio.features import fbank

    out = []
    cuts = [*CutSet.from_file(corpus / "dev_cuts.jsonl.gz"),
            *CutSet.from_file(corpus / "test_cuts.jsonl.gz")]
    for cut in cuts:
        lang = cut.supervisions[0].language
        if lang in LANGUAGES:
            x = torch.from_numpy(fbank(cut.load_audio()[0]))
            out.append((cut.id, lang, (x - x.mean(0)) / (x.std(0) + 1e-5)))
    return out


def _model(variant: str, preset: str, sizes: dict[str, int]):
    from speechlab.asr.rnnt.model import build

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = build(variant, sizes, preset).eval()
        with torch.no_grad():
            for head in model.joiner.outputs:
                head.weight.mul_(6.0)
            if model.lid_head is not None:  # a LID head that prefers the first language
                for p in model.lid_head.parameters():
                    p.mul_(3.0)
    return model


def hypotheses(corpus: Path) -> dict[str, Any]:
    """``{case: {utterance id: [tokens, score]}}`` for every case of the module doc."""
    from speechlab.asr.rnnt.config import DecodeConfig, EarlyStopConfig, SearchConfig
    from speechlab.asr.rnnt.multilingual_decode import decode_lid_free
    from speechlab.asr.rnnt.search import decode

    utts = _features(corpus)
    sizes = {"en": 9, "hi": 7}
    out: dict[str, Any] = {}
    for preset in PRESETS:
        for variant in VARIANTS:
            model = _model(variant, preset, {"en": 9} if variant == "mono" else sizes)
            for method, beam, symbols in SEARCHES:
                search = SearchConfig(method, beam, symbols)
                key = f"{preset}/{variant}/{method}"
                out[key] = {}
                for uid, lang, x in utts:
                    if variant == "mono" and lang != "en":
                        continue
                    language = None if variant in ("mono", "vanilla") else lang
                    (h,) = decode(model, x[None], torch.tensor([x.shape[0]]), language, search)
                    out[key][uid] = [list(h.tokens), h.score, list(h.times)]
                if variant != "multisoftmax_lid":
                    continue
                for tau, s_th in EARLY_STOPS:
                    key = f"{preset}/{variant}/{method}/lid-free/{tau:g},{s_th:g}"
                    out[key] = {}
                    cfg = DecodeConfig(search=search, early_stop=EarlyStopConfig(tau, s_th),
                                       chunk_frames=16)
                    for uid, _lang, x in utts:
                        r = decode_lid_free(model, x, cfg)
                        out[key][uid] = [r.language, {k: list(v) for k, v in r.hypotheses.items()},
                                         r.active_frames]
    return out


def recorded(corpus: Path | None = None) -> dict[str, Any]:
    """The cases on the tiny corpus (built in a temporary directory if not given)."""
    from speechlab.testing.corpus import tiny_corpus

    if corpus is not None:
        return hypotheses(corpus)
    with tempfile.TemporaryDirectory() as tmp:
        return hypotheses(tiny_corpus(tmp))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    args.out.write_text(json.dumps(recorded(), indent=0) + "\n", encoding="utf-8")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
