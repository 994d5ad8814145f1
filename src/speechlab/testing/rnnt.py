"""Untrained RNN-Ts for decoding tests: a run directory laid out like a trained one, or a
recognizer in memory.

``rnnt decode RUN MODEL WAV`` reads ``RUN/models/MODEL/ckpt-*.pt`` (which say what model they
hold),
``RUN/lang/<lang>.json`` and ``RUN/lang/cmvn.safetensors``; :func:`untrained_run` writes all of
them for a model with random weights (the ``ci`` preset by default: decodes in milliseconds),
so tests of the decoding command need no training. :func:`untrained_recognizer` gives such a
model as an :class:`~speechlab.asr.rnnt.recognizer.RnntRecognizer`, its output layers
sharpened so that it emits labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

# A few words per language: the tokenizers' graphemes.
TEXTS = {"en": ["hello world", "the quick brown fox"], "hi": ["नमस्ते दुनिया"],
         "ta": ["வணக்கம் உலகம்"], "gu": ["નમસ્તે દુનિયા"]}


def untrained_run(out_dir: str | Path, variant: str = "multisoftmax_lid",
                  languages: tuple[str, ...] = ("en", "hi"), preset: str = "ci",
                  name: str | None = None, seed: int = 0) -> Path:
    """Write a run directory holding one untrained ``variant`` model named ``name`` (default:
    the variant); returns the run directory."""
    from speechlab.asr.rnnt.model import FAMILY, build
    from speechlab.asr.rnnt.presets import get_preset
    from speechlab.audio.transforms import GlobalCMVN
    from speechlab.text.graphemes import GraphemeTokenizer
    from speechlab.train.card import ModelCard
    from speechlab.train.checkpoint import checkpoint_path, save_checkpoint

    out = Path(out_dir)
    tokenizers = {lang: GraphemeTokenizer.build(TEXTS[lang], lang) for lang in languages}
    for lang, tok in tokenizers.items():
        tok.save(out / "lang" / f"{lang}.json")
    sizes = {lang: len(tok) for lang, tok in tokenizers.items()}
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = build(variant, sizes, preset)
        cmvn = GlobalCMVN(dim=get_preset(preset).feature_dim)
        cmvn.accumulate(torch.randn(200, cmvn.dim) * 3 + 5)
    cmvn.finalize().save(out / "lang" / "cmvn.safetensors")
    model_dir = out / "models" / (name or variant)
    save_checkpoint(checkpoint_path(model_dir, 0), step=0, model=model.state_dict(),
                    model_config=ModelCard.of(FAMILY, model.config).to_dict())
    return out


def untrained_recognizer(variant: str = "multisoftmax_lid",
                         languages: tuple[str, ...] = ("en", "hi"), preset: Any = "ci",
                         seed: int = 0, sharpen: float = 8.0) -> Any:
    """An :class:`~speechlab.asr.rnnt.recognizer.RnntRecognizer` of an untrained ``variant``
    (``preset``: a preset name or a :class:`~speechlab.asr.rnnt.config.ModelDims` reading
    80-dim fbank) whose joint output layers are scaled by ``sharpen``, so that random
    weights emit a mix of labels rather than blank everywhere."""
    from speechlab.asr.rnnt.model import build
    from speechlab.asr.rnnt.recognizer import RnntRecognizer
    from speechlab.audio.transforms import GlobalCMVN
    from speechlab.text.graphemes import GraphemeTokenizer

    tokenizers = {lang: GraphemeTokenizer.build(TEXTS[lang], lang) for lang in languages}
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = build(variant, {lang: len(tok) for lang, tok in tokenizers.items()}, preset)
        with torch.no_grad():
            for head in model.joiner.outputs:
                head.weight.mul_(sharpen)
        cmvn = GlobalCMVN(dim=80)
        cmvn.accumulate(torch.randn(200, 80) * 3 + 5)
    return RnntRecognizer(model.eval(), tokenizers, cmvn.finalize())


def same_words(got: Any, want: Any, abs_tol: float = 1e-5) -> None:
    """Assert that two transcripts have the same words at the same times, with confidences
    equal to ``abs_tol`` (a word's confidence reads the joint's probabilities, which two
    backends' float kernels give a little apart)."""
    import pytest

    assert [(w.word, w.start, w.end) for w in got.words or ()] == \
        [(w.word, w.start, w.end) for w in want.words or ()]
    assert [w.confidence for w in got.words or ()] == \
        pytest.approx([w.confidence for w in want.words or ()], abs=abs_tol)
