"""Audio in pieces, for recognizers of every family: a long recording cut at quiet moments
for a model that reads whole utterances (:func:`iter_pieces`), or fed in fixed blocks to a
stream (:func:`iter_blocks`); files are read a block at a time, so a recording of any length
never sits in memory whole.

- :func:`split_points`: where to cut a long recording: near every ``max_seconds``, at the
  quietest 20 ms around it;
- :func:`audio_seconds`: how long audio (a path or samples) lasts, without reading it.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def split_points(samples: np.ndarray, sample_rate: int, max_seconds: float,
                 search_seconds: float = 2.0) -> list[int]:
    """Sample indices that cut ``samples`` into pieces of at most ``max_seconds``: each cut
    is at the quietest 20 ms within the last ``search_seconds`` before the limit, so that a
    word is rarely cut in two. Returns the starts of the pieces after the first."""
    n = len(samples)
    limit = int(max_seconds * sample_rate)
    if n <= limit:
        return []
    hop = max(1, sample_rate // 50)
    cuts, start = [], 0
    while n - start > limit:
        lo = start + max(hop, limit - int(search_seconds * sample_rate))
        hi = start + limit
        windows = samples[lo:hi][: (hi - lo) // hop * hop].reshape(-1, hop)
        quietest = int(np.argmin((windows.astype(np.float64) ** 2).sum(axis=1))) if len(windows) else 0
        cut = lo + quietest * hop + hop // 2
        cuts.append(cut)
        start = cut
    return cuts


def audio_seconds(audio: Any, sample_rate: int) -> float:
    """How long ``audio`` (a path, or samples at ``sample_rate``) lasts, without reading it."""
    if isinstance(audio, (str, bytes)) or hasattr(audio, "__fspath__"):
        from speechlab.audio.io import audio_info

        info = audio_info(audio)
        return info.frames / info.sample_rate
    return len(audio) / sample_rate


def iter_pieces(audio: Any, sample_rate: int, target_rate: int, max_seconds: float,
                *, what: str = "audio") -> Any:
    """``(offset seconds, mono float32 samples at target_rate)`` pieces of ``audio`` (a path,
    or samples at ``sample_rate``), each at most ``max_seconds``, cut at the quietest moment
    before the limit (:func:`split_points`). A file is read by :func:`iter_blocks`, block by
    block, so a recording of any length never sits in memory whole."""
    from speechlab.audio.io import as_samples

    if not (isinstance(audio, (str, bytes)) or hasattr(audio, "__fspath__")):
        samples = as_samples(audio, sample_rate, target_rate, what=what)
        cuts = [0, *split_points(samples, target_rate, max_seconds), len(samples)]
        for a, b in zip(cuts[:-1], cuts[1:]):
            yield a / target_rate, samples[a:b]
        return
    # A file: the blocks a stream would be fed, carried over and cut at quiet moments.
    carry = np.zeros(0, np.float32)
    done = 0  # samples (at target_rate) already yielded
    limit = int(max_seconds * target_rate)
    for _, x in iter_blocks(audio, sample_rate, target_rate, max_seconds):
        carry = np.concatenate([carry, x])
        while len(carry) > limit:
            cut = split_points(carry, target_rate, max_seconds)[0]
            yield done / target_rate, carry[:cut]
            done += cut
            carry = carry[cut:]
    while len(carry):
        cut = (split_points(carry, target_rate, max_seconds) or [len(carry)])[0]
        yield done / target_rate, carry[:cut]
        done += cut
        carry = carry[cut:]


def iter_blocks(audio: Any, sample_rate: int, target_rate: int, seconds: float) -> Any:
    """``(offset seconds, samples at target_rate)`` consecutive blocks of ``audio`` (a path,
    read a block at a time, or samples at ``sample_rate``), ``seconds`` long but the last:
    what a streaming model is fed."""
    from speechlab.audio.io import as_samples

    if not (isinstance(audio, (str, bytes)) or hasattr(audio, "__fspath__")):
        samples = as_samples(audio, sample_rate, target_rate)
        step = max(1, int(seconds * target_rate))
        for i in range(0, len(samples), step):
            yield i / target_rate, samples[i : i + step]
        return
    import soundfile as sf

    from speechlab.audio.io import audio_info

    info = audio_info(audio)
    done = 0.0
    with sf.SoundFile(str(audio)) as f:
        for raw in f.blocks(blocksize=max(1, int(seconds * info.sample_rate)), dtype="float32",
                            always_2d=True):
            x = raw.mean(axis=1) if raw.shape[1] > 1 else raw[:, 0]
            x = as_samples(x, info.sample_rate, target_rate, what=str(audio))
            yield done, x
            done += len(x) / target_rate
