"""Word times of the CTC-topology recognizer from its best path (``word_frames``): a word
label that comes after the word's phones or before them, and a pause between two words, which
ends the one and starts the other."""

from __future__ import annotations

import numpy as np

from speechlab.asr.ctc.recognizer import word_frames


def _path(spec: str) -> np.ndarray:
    """'#' a non-blank frame, '_' a blank one."""
    return np.array([0 if c == "_" else 5 for c in spec])


def test_words_without_pauses_end_after_their_last_non_blank_frame():
    tokens = _path("###_##__###")
    assert word_frames(tokens, [0, 4, 8], pause=3) == [(0, 3), (4, 6), (8, 11)]


def test_a_pause_ends_a_word_and_the_phones_after_it_start_the_next():
    # the second word's label comes 3 frames after its phones began, past a 6-frame pause
    tokens = _path("####______######")
    assert word_frames(tokens, [0, 13], pause=5) == [(0, 4), (10, 16)]
    # the same with the label at the phones' start: nothing moves
    assert word_frames(tokens, [0, 10], pause=5) == [(0, 4), (10, 16)]


def test_a_short_gap_is_not_a_pause():
    tokens = _path("####___######")
    assert word_frames(tokens, [0, 10], pause=5) == [(0, 10), (10, 13)]


def test_the_first_word_starts_with_its_phones_before_its_label_and_after_leading_silence():
    tokens = _path("________####__##")
    assert word_frames(tokens, [10, 14], pause=5) == [(8, 12), (14, 16)]
    # no voiced frame before the label: the label's frame
    assert word_frames(_path("______####"), [6], pause=3) == [(6, 10)]


def test_a_pause_inside_the_last_word_ends_it_and_spans_stay_ordered():
    tokens = _path("###_______##########______")
    spans = word_frames(tokens, [0, 12], pause=4)
    assert spans == [(0, 3), (10, 20)]
    # several pauses between two labels: the first ends the word, the last starts the next
    tokens = _path("##_____##_____###")
    assert word_frames(tokens, [0, 16], pause=4) == [(0, 2), (14, 17)]
    for spec in ("#_#__#___#____#", "_____", "##########", "#____#____#____#"):
        tokens = _path(spec)
        labels = list(range(0, len(spec), 4))
        spans = word_frames(tokens, labels, pause=3)
        assert all(s < e for s, e in spans)
        assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
        assert word_frames(tokens, [], pause=3) == []
