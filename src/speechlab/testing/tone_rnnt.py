"""A multi-softmax LID RNN-T planted to spell a known text from tone bursts, and its audio.

An untrained model emits labels at random, and its output changes with any shift or
resampling of the audio: it cannot check that audio which went through a browser's microphone
path (resampled twice, started a few milliseconds late, followed by silence) is recognized as
the file it came from. This model's answer is planted instead: each grapheme of ``text`` has
a tone (:data:`TONES`), and the model emits that grapheme once when its tone starts. The same
text comes out for any start offset, any amount of silence around the bursts and any small
resampling error, so streaming, uploading and the command line must agree exactly.

How the weights plant it (the ``ci`` preset's sizes, every other weight zero):

- CMVN is the identity, so the encoder sees log-mel energies;
- encoder LSTM unit k: gates saturated open (input, output) and shut (forget), cell input
  ``tanh(2 (mean of mel bin b_k over the 8 stacked frames - threshold_k))``: about +0.76 while
  tone k sounds, -0.76 otherwise (the unit has no memory);
- prediction LSTM unit k: the same gates, about +0.76 when the last label was grapheme k;
- joint unit k: ``tanh(10/0.76 (enc_k - pred_k) - 5)``: +1 only when tone k sounds and
  grapheme k was not the last label; the English output gives grapheme k the logit
  ``8 x`` that unit (blank 0, the rest -20), so it is emitted once per burst;
- Hindi's output only ever prefers blank, and the LID head gives English 0.88 on every frame.

A grapheme may come back later in ``text`` but not twice in a row (the prediction network
remembers only the last label).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

#: Tone frequencies (Hz): far apart on the mel scale, each loudest in its own fbank bin.
TONES = (250.0, 500.0, 900.0, 1500.0, 2400.0, 3800.0)
TEXT = "the fox"
AMPLITUDE = 0.3
MODEL = "multisoftmax_lid"


def graphemes(text: str) -> list[str]:
    """The English tokenizer's symbols of ``text`` (``B_`` starts a word)."""
    out = []
    for word in text.split():
        out += ["B_" + word[0], *word[1:]]
    return out


def tone_of(text: str) -> dict[str, float]:
    """Grapheme -> tone frequency, in order of first use in ``text``."""
    symbols = graphemes(text)
    distinct = list(dict.fromkeys(symbols))
    if len(distinct) > len(TONES):
        raise ValueError(f"{text!r} has {len(distinct)} distinct graphemes; the planted model "
                         f"knows {len(TONES)} tones")
    if any(a == b for a, b in zip(symbols, symbols[1:])):
        raise ValueError(f"{text!r} repeats a grapheme; the planted model emits each once per run "
                         "of its tone")
    return dict(zip(distinct, TONES))


def tone_samples(text: str = TEXT, sample_rate: int = 16000, *, lead: float = 0.6,
                 burst: float = 0.25, gap: float = 0.12, tail: float = 0.9) -> np.ndarray:
    """Digital silence, then one ramped tone burst per grapheme of ``text``, then silence."""
    tones = tone_of(text)
    n_burst = int(burst * sample_rate)
    t = np.arange(n_burst) / sample_rate
    ramp = int(0.015 * sample_rate)  # no clicks: a click would sound in every bin
    envelope = np.ones(n_burst)
    envelope[:ramp] = 0.5 - 0.5 * np.cos(np.pi * np.arange(ramp) / ramp)
    envelope[-ramp:] = envelope[:ramp][::-1]
    pieces = [np.zeros(int(lead * sample_rate))]
    for symbol in graphemes(text):
        pieces += [AMPLITUDE * envelope * np.sin(2 * np.pi * tones[symbol] * t),
                   np.zeros(int(gap * sample_rate))]
    pieces.append(np.zeros(int(tail * sample_rate)))
    return np.concatenate(pieces).astype(np.float32)


def write_tone_wav(path: str | Path, text: str = TEXT, **kw) -> Path:
    """:func:`tone_samples` as a 16 kHz 16-bit WAV."""
    import soundfile as sf

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, tone_samples(text, **kw), 16000, subtype="PCM_16")
    return path


def _bins_and_thresholds(freqs: list[float]) -> tuple[list[int], list[float]]:
    """Per tone, its loudest fbank bin and a threshold halfway (in log energy) between the
    tone's level there and the loudest level any other tone leaks into that bin."""
    from speechlab.audio.features import fbank

    t = np.arange(8000) / 16000
    levels = [fbank((AMPLITUDE * np.sin(2 * np.pi * f * t)).astype(np.float32))[10:-10].mean(0)
              for f in freqs]
    bins = [int(level.argmax()) for level in levels]
    thresholds = []
    for k, b in enumerate(bins):
        leak = max([levels[j][b] for j in range(len(freqs)) if j != k]
                   + [float(fbank(np.zeros(4000, np.float32))[5, b])])
        thresholds.append(float(0.5 * (levels[k][b] + leak)))
    return bins, thresholds


def planted_run(out_dir: str | Path, text: str = TEXT) -> Path:
    """A run directory (``RUN/models/multisoftmax_lid``, ``RUN/lang``) whose model spells
    ``text`` from :func:`tone_samples` (module doc); returns the run directory."""
    from speechlab.audio.transforms import GlobalCMVN
    from speechlab.testing.rnnt import untrained_run
    from speechlab.text.graphemes import GraphemeTokenizer
    from speechlab.train.checkpoint import load_checkpoint, save_checkpoint

    run = untrained_run(out_dir, MODEL, ("en", "hi"), preset="ci")
    tones = tone_of(text)
    en = GraphemeTokenizer.load(run / "lang" / "en.json")
    missing = [s for s in tones if s not in en.symbols]
    if missing:
        raise ValueError(f"{text!r}: graphemes {missing} are not in the test tokenizer")
    labels = [en.symbols.index(s) for s in tones]
    bins, thresholds = _bins_and_thresholds(list(tones.values()))

    path = next((run / "models" / MODEL).glob("ckpt-*.pt"))
    ckpt = load_checkpoint(path)
    ckpt.pop("format_version")
    w = {k: torch.zeros_like(v) for k, v in ckpt["model"].items()}
    H = w["encoder.lstm.weight_hh_l0"].shape[1]
    P = w["predictor.lstms.0.weight_hh_l0"].shape[1]
    stack, feat = 8, 80
    for lstm, size in (("encoder.lstm", H), ("predictor.lstms.0", P)):
        bias = w[f"{lstm}.bias_ih_l0"]  # gates: input, forget, cell, output
        bias[:size], bias[size:2 * size], bias[3 * size:] = 20.0, -20.0, 20.0
    gain = 2.0
    for k, (b, thr) in enumerate(zip(bins, thresholds)):
        for s in range(stack):
            w["encoder.lstm.weight_ih_l0"][2 * H + k, s * feat + b] = gain / stack
        w["encoder.lstm.bias_ih_l0"][2 * H + k] = -gain * thr
        w["predictor.embeddings.0.weight"][labels[k], k] = 1.0
        w["predictor.lstms.0.weight_ih_l0"][2 * P + k, k] = 5.0
        on = float(np.tanh(np.tanh(5.0)))  # a unit's level when it is on
        w["joiner.enc_proj.weight"][k, k] = 10.0 / on
        w["joiner.pred_proj.weight"][k, k] = -10.0 / on
        w["joiner.enc_proj.bias"][k] = -5.0
        w["joiner.outputs.0.weight"][labels[k], k] = 8.0
    for head in ("joiner.outputs.0.bias", "joiner.outputs.1.bias"):
        w[head][1:] = -20.0
    for k in labels:
        w["joiner.outputs.0.bias"][k] = 0.0
    w["lid_head.bias"][:] = torch.tensor([1.0, -1.0])
    ckpt["model"] = w
    save_checkpoint(path, **ckpt)
    cmvn = GlobalCMVN(dim=feat)  # the identity: mean 0, std 1
    cmvn.save(run / "lang" / "cmvn.safetensors")
    return run
