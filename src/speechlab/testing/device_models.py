"""Tiny untrained models of every kind, as :func:`speechlab.load` gives them, with what each
does on a fixed input: the tests of ``Model.to(device)`` compare the outputs on a device with
the CPU's (:func:`outputs`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np


def models(tmp: Path) -> dict[str, Callable[[], Any]]:
    """Name -> a function that loads the model afresh (on the CPU)."""
    import speechlab
    from speechlab.testing.rnnt import untrained_recognizer
    from speechlab.testing.tiny_models import ctc_package, hf_ctc_directory, salad_package

    # Each package is written when its model is first asked for: one kind that cannot be
    # built where the tests run does not take the others down with it.
    def loader(make: Callable[[Path], Path], name: str) -> Callable[[], Any]:
        def load() -> Any:
            path = tmp / name
            return speechlab.load(path if path.exists() else make(path))
        return load

    return {"ctc": loader(ctc_package, "ctc"), "salad": loader(salad_package, "salad"),
            "wav2vec2": loader(hf_ctc_directory, "hf"),
            "rnnt": lambda: untrained_recognizer(languages=("en",))}


def outputs(model: Any) -> dict[str, Any]:
    """What ``model`` makes of a fixed input: the transcript (and the streamed one) of two
    seconds of tones, or the acoustic frames of a short label sequence."""
    if model.kind == "tts":
        from speechlab.testing.tts_labels import HELLO_LABELS
        from speechlab.tts.labels import parse_labels

        return {"acoustic": model.acoustic(parse_labels(HELLO_LABELS))}
    from speechlab.testing.audio import tone_samples

    audio = np.concatenate([tone_samples(1.0, 300.0), tone_samples(1.0, 900.0)])
    out = {"text": model.transcribe(audio, 16000).text}
    if model.streaming:
        stream = model.stream()
        for i in range(0, len(audio), 3200):
            stream.accept_waveform(audio[i:i + 3200], 16000)
        out["stream"] = stream.finish().text
    return out
