"""Every model family speechlab trains, by the name its checkpoints carry.

This module stands above the papers' libraries: a new family plugs in with one line in
:func:`builders` (its module's ``BUILDERS``). The shared layers below rebuild a model only
through the builders they are handed (:func:`speechlab.train.card.load_trained`); each
family's own ``load`` uses its own.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from speechlab.train.card import Builder
from speechlab.train.card import load_trained as _load_trained


def builders() -> dict[str, Builder]:
    """family name -> builder from the family's config dict, for every family."""
    from speechlab.asr.ctc.model import BUILDERS as CTC
    from speechlab.asr.rnnt.model import BUILDERS as RNNT
    from speechlab.ssl.wav2vec2.model import BUILDERS as WAV2VEC2
    from speechlab.tts.model import BUILDERS as TTS

    return {**RNNT, **CTC, **WAV2VEC2, **TTS}


def load_trained(path: str | Path) -> nn.Module:
    """Any model speechlab trained, from its model directory or checkpoint, in eval mode."""
    return _load_trained(path, builders())
