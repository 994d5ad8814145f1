"""Audio in pieces (speechlab.audio.chunks): a file read block by block gives the same pieces
as the same samples in memory, every piece within the limit and cut at a quiet moment, and the
pieces (or blocks) put back together are the whole recording."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from speechlab.audio.chunks import audio_seconds, iter_blocks, iter_pieces, split_points
from speechlab.errors import DataError

RATE = 16000


def _speech_with_pauses(seconds: float, seed: int = 0) -> np.ndarray:
    """Bursts of noise with a 0.2 s pause every 1.3 s: where a cut belongs."""
    rng = np.random.default_rng(seed)
    x = (0.3 * rng.standard_normal(int(seconds * RATE))).astype(np.float32)
    for start in np.arange(1.1, seconds, 1.3):
        x[int(start * RATE): int((start + 0.2) * RATE)] *= 0.001
    return x


def test_pieces_of_a_file_equal_the_pieces_of_its_samples(tmp_path):
    x = _speech_with_pauses(23.0)
    path = tmp_path / "long.wav"
    sf.write(path, x, RATE, subtype="FLOAT")
    from_file = list(iter_pieces(path, RATE, RATE, 5.0))
    in_memory = list(iter_pieces(x, RATE, RATE, 5.0))
    assert [o for o, _ in from_file] == [o for o, _ in in_memory]
    for (_, a), (_, b) in zip(from_file, in_memory):
        np.testing.assert_array_equal(a, b)
    assert len(from_file) >= 5 and all(len(p) <= 5 * RATE for _, p in from_file)
    np.testing.assert_array_equal(np.concatenate([p for _, p in from_file]), x)
    # every cut but the end lies in a pause (the quietest 20 ms before the limit)
    for offset, _ in from_file[1:]:
        i = int(round(offset * RATE))
        assert np.abs(x[i - 80: i + 80]).max() < 0.01, offset
    assert audio_seconds(path, 8000) == pytest.approx(23.0)


def test_blocks_are_fixed_and_add_up_at_another_rate(tmp_path):
    x = _speech_with_pauses(3.3)
    path = tmp_path / "a.wav"
    sf.write(path, x, RATE, subtype="FLOAT")
    blocks = list(iter_blocks(path, RATE, 8000, 0.5))
    assert [round(o, 3) for o, _ in blocks] == [round(0.5 * k, 3) for k in range(7)]
    assert all(len(b) == 4000 for _, b in blocks[:-1]) and len(blocks[-1][1]) == 2400
    assert sum(len(b) for _, b in blocks) == len(x) // 2


def test_split_points_and_bad_samples():
    assert split_points(np.zeros(RATE, np.float32), RATE, 2.0) == []
    bad = _speech_with_pauses(2.0)
    bad[RATE] = np.nan
    with pytest.raises(DataError, match="non-finite"):
        list(iter_pieces(bad, RATE, RATE, 1.0))
