"""Calibration of word confidences: right words by alignment, ECE by bins, and `speechlab
calibrate` on a corpus (the planted tone model: its words are right and it is sure of them)."""

from __future__ import annotations

import pytest

from speechlab.metrics.calibration import calibration, correct_words


def test_correct_words_follow_the_alignment():
    assert correct_words(["the", "cat", "sat"], ["the", "big", "cat", "sad"]) == \
        [True, False, True, False]
    assert correct_words(["a"], []) == []


def test_ece_is_the_weighted_gap_between_confidence_and_accuracy():
    # two bins: 0.95 confidence, 3 of 4 right; 0.15 confidence, 1 of 4 right
    cal = calibration([0.95] * 4 + [0.15] * 4, [True, True, True, False, True, False, False,
                                                 False], bins=10)
    assert cal.words == 8 and cal.counts[9] == 4 and cal.counts[1] == 4
    assert cal.ece == pytest.approx(0.5 * abs(0.75 - 0.95) + 0.5 * abs(0.25 - 0.15))
    perfect = calibration([1.0, 1.0, 0.0], [True, True, False])
    assert perfect.ece == 0.0
    with pytest.raises(ValueError):
        calibration([0.5], [True, False])


def test_the_calibrate_command_on_a_corpus(tmp_path, capsys):
    import numpy as np
    import soundfile as sf
    from lhotse import CutSet, Recording, SupervisionSegment
    from lhotse.cut import MonoCut

    from speechlab.cli import main
    from speechlab.testing.tone_rnnt import MODEL, planted_run, tone_samples

    run = planted_run(tmp_path / "tones") / "models" / MODEL
    cuts = []
    for i, (text, lang) in enumerate((("the fox", "en"), ("the fox", "en"), ("x", "fr"))):
        path = tmp_path / f"{i}.wav"
        sf.write(path, tone_samples(), 16000)
        rec = Recording.from_file(path, recording_id=f"r{i}")
        sup = SupervisionSegment(f"s{i}", f"r{i}", 0.0, rec.duration, text=text, language=lang)
        cuts.append(MonoCut(f"c{i}", 0.0, rec.duration, 0, recording=rec, supervisions=[sup]))
    CutSet.from_cuts(cuts).to_file(tmp_path / "dev_cuts.jsonl.gz")
    plot = tmp_path / "rel.png"
    assert main(["calibrate", str(run), "--cuts", str(tmp_path / "dev_cuts.jsonl.gz"),
                 "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "4 words" in out and "accuracy 1.000" in out  # the French cut was not its to hear
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["calibrate", str(run), "--cuts", str(tmp_path / "dev_cuts.jsonl.gz"),
                 "--plot", str(plot)]) == 2  # not replaced without --overwrite
    assert np.isfinite(float(out.split("ECE) ")[1].split()[0]))
