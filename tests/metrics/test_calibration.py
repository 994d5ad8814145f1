"""Calibration of word confidences: right words by alignment, ECE by bins, the AUROC that a
map keeping the words' order cannot change, and `speechlab calibrate` on a corpus (the planted
tone model: its words are right and it is sure of them). Calibrated confidences: Platt scaling
fitted on words (speechlab.confidence), kept in a package's card by `calibrate --fit`, read
back by `load`, kept by `export`."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from speechlab.confidence import MIN_SLOPE, ConfidenceMap, fit_platt
from speechlab.errors import DataError
from speechlab.metrics.calibration import auroc, calibration, correct_words


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

    from speechlab.cli import main
    from speechlab.testing.tone_rnnt import MODEL, planted_run

    run = planted_run(tmp_path / "tones") / "models" / MODEL
    cuts = _tone_cuts(tmp_path)
    plot = tmp_path / "rel.png"
    assert main(["calibrate", str(run), "--cuts", cuts, "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "4 words" in out and "accuracy 1.000" in out  # the French cut was not its to hear
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["calibrate", str(run), "--cuts", cuts, "--plot", str(plot)]) == 2  # not replaced
    assert np.isfinite(float(out.split("ECE) ")[1].split(",")[0]))


def _platt_words(a: float, b: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = rng.uniform(0.02, 0.98, n)
    p = 1 / (1 + np.exp(-(a * np.log(c / (1 - c)) + b)))
    return c, rng.uniform(size=n) < p


def test_the_fit_finds_the_map_that_made_the_words():
    c, right = _platt_words(0.5, -1.0, 20000, seed=1)
    fitted = fit_platt(c, right)
    assert fitted.a == pytest.approx(0.5, abs=0.05) and fitted.b == pytest.approx(-1.0, abs=0.08)
    # it calibrates what it was fitted on: the mapped ECE is far below the raw one
    assert calibration(fitted.apply(c), right).ece < 0.02 < calibration(c, right).ece


def test_degenerate_words_give_a_finite_map_that_keeps_the_order():
    every = fit_platt([1.0] * 10, [True] * 6 + [False] * 4)  # one confidence for all
    assert 0 < every(1.0) < 1 and math.isfinite(every.a) and every.a >= 0
    # confidence against correctness: about the same probability for every word, the order
    # kept by the least slope
    against = fit_platt([0.9, 0.8, 0.2, 0.1], [False, False, True, True])
    assert against.a == MIN_SLOPE and against(0.1) < against(0.9)
    assert against(0.9) == pytest.approx(0.5, abs=0.01) == against(0.1)
    # confidences that hardly vary (a lattice sure of nearly every word): the fit stays finite
    # where an undamped Newton step overshot without end
    near = fit_platt(list(np.linspace(0.98, 1.0, 40)), [True] * 39 + [False])
    assert math.isfinite(near.a) and math.isfinite(near.b) and 0.9 < near(0.99) < 1
    assert all(0 < near(c) < 1 for c in (0.0, 0.5, 1.0))
    assert ConfidenceMap(50.0, 900.0)(1.0) == 1.0 and ConfidenceMap(50.0, -900.0)(0.5) == 0.0
    all_right = fit_platt([0.3, 0.6, 0.9], [True] * 3)
    assert 0.5 < all_right(0.3) <= all_right(0.9) < 1  # Platt's targets keep it below 1
    with pytest.raises(ValueError):
        fit_platt([], [])
    with pytest.raises(ValueError):
        fit_platt([0.5], [True, False])


def test_the_map_is_monotone_and_goes_through_json():
    m = ConfidenceMap(0.3, 0.2, {"words": 5})
    xs = [0.0, 1e-5, 0.1, 0.5, 0.9, 0.9999, 1.0]
    ys = [m(x) for x in xs]
    assert all(0 < y < 1 for y in ys) and ys == sorted(ys) and len(set(ys)) == len(ys)
    assert m.apply([0.5, None]) == [m(0.5), None]
    assert ConfidenceMap.from_json(m.to_json(), "card") == m
    for bad in ({"method": "isotonic", "a": 1, "b": 0}, {"method": "platt", "a": 1},
                {"method": "platt", "a": -1, "b": 0}, {"method": "platt", "a": "x", "b": 0},
                {"method": "platt", "a": float("nan"), "b": 0}, [1, 2],
                {"method": "platt", "a": 1, "b": 0, "fitted_on": 3}):
        with pytest.raises(DataError, match="card"):
            ConfidenceMap.from_json(bad, "card")


def test_auroc_counts_the_pairs_and_a_monotone_map_keeps_it():
    assert auroc([0.9, 0.8, 0.3, 0.3], [True, False, True, False]) == pytest.approx(0.625)
    assert auroc([0.2, 0.9], [False, True]) == 1.0 and math.isnan(auroc([0.5], [True]))
    rng = np.random.default_rng(3)
    c = np.round(rng.uniform(size=60), 1)  # with ties
    y = rng.uniform(size=60) < c
    pairs = [(1.0 if p > q else 0.5 if p == q else 0.0)
             for (p, yp), (q, yq) in itertools.product(zip(c, y), repeat=2) if yp and not yq]
    assert auroc(c, y) == pytest.approx(sum(pairs) / len(pairs))
    assert auroc(ConfidenceMap(0.7, -0.4).apply(c), y) == pytest.approx(auroc(c, y))
    assert calibration(c, y).auroc == pytest.approx(auroc(c, y))


def test_calibrate_fit_writes_the_map_that_load_and_export_keep(tmp_path, capsys):
    from speechlab.cli import main
    from speechlab.inference import load
    from speechlab.package import read_card
    from speechlab.testing.tone_rnnt import MODEL, planted_run, tone_samples

    run = planted_run(tmp_path / "tones") / "models" / MODEL
    cuts = _tone_cuts(tmp_path)
    pkg, again = tmp_path / "pkg", tmp_path / "pkg2"
    assert main(["export", str(run), "--out", str(pkg)]) == 0
    raw = load(pkg).transcribe(tone_samples(), 16000, nbest=4)
    assert main(["calibrate", str(run), "--cuts", cuts, "--fit"]) == 2  # not a package
    assert main(["calibrate", str(pkg), "--cuts", cuts, "--fit", "--raw"]) == 2
    assert main(["calibrate", str(pkg), "--cuts", cuts, "--fit", "--plot",
                 str(tmp_path / "rel.svg")]) == 0
    out = capsys.readouterr().out
    assert "mapped (a " in out and "confidence map written" in out
    fitted = read_card(pkg).data["confidence_map"]
    assert fitted["method"] == "platt" and fitted["fitted_on"]["words"] == 4
    svg = (tmp_path / "rel.svg").read_text()  # the diagram as text, for the docs
    assert "<svg" in svg and "(mapped)" in svg and "dc:date" not in svg
    assert main(["calibrate", str(pkg), "--cuts", cuts, "--fit"]) == 2  # has one already
    assert main(["calibrate", str(pkg), "--cuts", cuts, "--fit", "--overwrite"]) == 0
    capsys.readouterr()

    model = load(pkg)
    m = ConfidenceMap.from_json(read_card(pkg).data["confidence_map"], "card")
    heard = model.transcribe(tone_samples(), 16000, nbest=4)
    assert heard.text == raw.text and heard.words
    assert [w.confidence for w in heard.words] == m.apply([w.confidence for w in raw.words])
    assert all(w.confidence != r.confidence for w, r in zip(heard.words, raw.words))
    on_onnx = load(pkg, backend="onnx")
    assert on_onnx.confidence_map == m
    assert main(["export", str(pkg), "--out", str(again), "--format", "onnx"]) == 0
    assert read_card(again).data["confidence_map"] == read_card(pkg).data["confidence_map"]
    # the command measures through the map unless told --raw
    assert main(["calibrate", str(pkg), "--cuts", cuts]) == 0
    assert "through its confidence map, fitted on 4 words" in capsys.readouterr().out
    assert main(["calibrate", str(pkg), "--cuts", cuts, "--raw"]) == 0
    assert "(raw): 4 words, mean confidence 0.99" in capsys.readouterr().out


def test_a_broken_map_in_a_card_is_one_error(tmp_path, capsys):
    import json

    import soundfile as sf

    from speechlab.cli import main
    from speechlab.testing.tone_rnnt import MODEL, planted_run, tone_samples

    run = planted_run(tmp_path / "tones") / "models" / MODEL
    pkg = tmp_path / "pkg"
    assert main(["export", str(run), "--out", str(pkg)]) == 0
    card = json.loads((pkg / "speechlab.json").read_text())
    card["data"]["confidence_map"] = {"method": "platt", "a": -2, "b": 0}
    (pkg / "speechlab.json").write_text(json.dumps(card))
    wav = tmp_path / "0.wav"
    sf.write(wav, tone_samples(), 16000)
    assert main(["transcribe", str(pkg), str(wav)]) == 2
    assert "confidence map's a (-2.0) must be finite and >= 0" in capsys.readouterr().err


def _tone_cuts(tmp_path) -> str:
    import soundfile as sf
    from lhotse import CutSet, Recording, SupervisionSegment
    from lhotse.cut import MonoCut

    from speechlab.testing.tone_rnnt import tone_samples

    cuts = []
    for i, (text, lang) in enumerate((("the fox", "en"), ("the fox", "en"), ("x", "fr"))):
        path = tmp_path / f"{i}.wav"
        sf.write(path, tone_samples(), 16000)
        rec = Recording.from_file(path, recording_id=f"r{i}")
        sup = SupervisionSegment(f"s{i}", f"r{i}", 0.0, rec.duration, text=text, language=lang)
        cuts.append(MonoCut(f"c{i}", 0.0, rec.duration, 0, recording=rec, supervisions=[sup]))
    out = tmp_path / "dev_cuts.jsonl.gz"
    CutSet.from_cuts(cuts).to_file(out)
    return str(out)
