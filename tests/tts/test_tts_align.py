"""``speechlab data align-tts``: recorded English speech with text -> a TTS corpus whose labels
are festival's, timed by DTW against festival's reading. The warp and the retiming on their own;
the accuracy against true phone times (one festival voice aligned with the other); a prepared
LJSpeech- and ARCTIC-shaped corpus aligned and SALAD run on it at the ci scale; bad input
refused with one line; a killed run resumed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from speechlab.cli import main
from speechlab.errors import DataError
from speechlab.testing import real_corpora as rc
from speechlab.testing.files import snapshot
from speechlab.tts import align as al
from speechlab.tts.corpus import check_pair, festival_synthesize, load_tts_split
from speechlab.tts.labels import FRAME_SECONDS, Labels, load_labels, parse_labels

CONTEXT = "x^x-{}+x=x@x_x/A:0_0_0/B:x-x-x@x-x&x-x#x-x$x-x!x-x;x-x|x"


def _labels(ends: list[int]) -> Labels:
    starts = [0, *ends[:-1]]
    return Labels(np.array(starts), np.array(ends), tuple(CONTEXT.format(p) for p in
                                                          ["pau", "ax", "b", "pau"][:len(ends)]),
                  "test")


def test_the_warp_of_a_sequence_with_itself_and_with_its_slow_copy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 4)).astype(np.float32)
    first, cost = al.warp(x, x)
    assert list(first) == list(range(51)) and cost == 0
    slow = np.repeat(x, 2, axis=0)  # every frame held twice as long
    first, _ = al.warp(x, slow)
    assert list(first) == [2 * i for i in range(51)]
    with pytest.raises(DataError, match="one D"):
        al.warp(x, x[:, :3])


def test_retiming_keeps_order_a_frame_per_phone_and_the_recordings_end():
    labels = _labels([10, 20, 30, 40])
    first = np.arange(41) * 2
    got = al.retime(labels, first, 80)
    assert list(got.starts) == [0, 20, 40, 60] and list(got.ends) == [20, 40, 60, 80]
    squeezed = al.retime(labels, np.zeros(41, np.int64), 80)  # the warp put every phone at 0
    assert list(squeezed.ends) == [1, 2, 3, 80] and (squeezed.durations >= 1).all()
    late = al.retime(labels, np.full(41, 80), 80)  # ... or at the end
    assert list(late.starts) == [0, 77, 78, 79] and (late.durations >= 1).all()
    with pytest.raises(DataError, match="4 phones do not fit in 3 frames"):
        al.retime(labels, first, 3)
    lines = al.label_lines(got)
    assert lines[1].startswith("1000000 2000000 ")  # 100 ns units
    assert list(parse_labels(lines).ends) == list(got.ends)


def test_a_recording_and_a_reference_of_other_lengths_are_refused():
    labels = _labels([10, 20, 30, 40])
    with pytest.raises(DataError, match=r"ratio 3\.00, at most 2\.5 allowed\); do text and audio"):
        al.align_recording(np.zeros(3 * 3200, np.float32), np.zeros(3200, np.float32), labels)


SENTENCES = ["The garden gate was painted green before the rain came back.",
             "Please send the second copy of the report to our office on Monday."]


@pytest.fixture(scope="module")
def readings(tmp_path_factory):
    """Each sentence read by festival's SLT HTS and KAL diphone voices, with true labels."""
    tmp = tmp_path_factory.mktemp("festival")
    out = {}
    for name, voice in al.REFERENCE_VOICES.items():
        got = festival_synthesize([(f"s{i}", s) for i, s in enumerate(SENTENCES)], tmp / name,
                                  voice)
        out[name] = [(got[f"s{i}"][0], parse_labels(got[f"s{i}"][1], f"{name} s{i}"))
                     for i in range(len(SENTENCES))]
    return out


def test_one_voice_aligned_with_the_other_finds_the_true_phone_times(readings):
    """KAL read, SLT as the reference (and back): boundaries of phones both readings share
    land near the reader's true ones, far nearer than a linear stretch of the reference."""
    import difflib

    for reader, reference in (("kal", "slt"), ("slt", "kal")):
        warp_err, linear_err = [], []
        for (audio, truth), (ref_audio, ref_labels) in zip(readings[reader], readings[reference]):
            got = al.align_recording(audio, ref_audio, ref_labels)
            assert got.labels.contexts == ref_labels.contexts
            assert got.labels.num_frames == len(audio) // al.HOP
            scale = len(audio) / len(ref_audio)
            sm = difflib.SequenceMatcher(a=truth.phones, b=ref_labels.phones, autojunk=False)
            for a, b, n in sm.get_matching_blocks():
                for k in range(n - 1):
                    warp_err.append(abs(int(got.labels.ends[b + k]) - int(truth.ends[a + k])))
                    linear_err.append(abs(ref_labels.ends[b + k] * scale - truth.ends[a + k]))
        warp_ms = 1000 * FRAME_SECONDS * np.array(warp_err)
        linear_ms = 1000 * FRAME_SECONDS * np.array(linear_err)
        assert len(warp_ms) >= 40
        # Measured 10 ms median, 12-16 ms mean against 140-160 ms for the stretch.
        assert np.median(warp_ms) <= 30, (reader, np.median(warp_ms))
        assert warp_ms.mean() <= 0.4 * linear_ms.mean(), (reader, warp_ms.mean(),
                                                          linear_ms.mean())


@pytest.fixture(scope="module")
def lj(tmp_path_factory):
    """An LJSpeech-shaped corpus, prepared."""
    from speechlab.data.prepare import prepare_corpus

    root = tmp_path_factory.mktemp("lj")
    prepare_corpus("ljspeech", rc.ljspeech(root / "src"), root / "prepared")
    return root / "prepared"


def test_a_prepared_ljspeech_becomes_a_tts_corpus_that_salad_trains_on(lj, tmp_path, capsys):
    from speechlab.report import Results

    out = tmp_path / "tts"
    assert main(["data", "align-tts", str(lj), "--out", str(out), "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "aligned 12 utterances" in said and "left out 0" in said
    info = json.loads((out / "corpus.json").read_text())
    assert info["kind"] == "tts" and set(info["splits"]) == {"train", "dev", "test"}
    assert info["aligned"]["utterances"] == 12 and info["aligned"]["config"]["voice"] == "slt"
    assert not (out / al.WORK).exists()
    rows = (out / "alignment.tsv").read_text().splitlines()
    assert rows[0].split("\t") == ["cost", "ratio", "split", "id"] and len(rows) == 13
    costs = [float(r.split("\t")[0]) for r in rows[1:]]
    assert costs == sorted(costs, reverse=True)  # worst first
    for split in ("train", "dev", "test"):
        for u in load_tts_split(out, split):
            labels = load_labels(u.labels)
            check_pair(u.wav, labels, 0.01, u.id)  # the labels end with the recording
            assert (labels.durations >= 1).all()
            assert labels.phones[0] == "pau" and u.text
    run = tmp_path / "salad"
    assert main(["reproduce", "salad", "--scale", "ci", "--corpus", str(out), "--out",
                 str(run)]) == 0
    assert Results.load(run).table("table2").rows


def test_a_corpus_of_several_speakers_needs_one_chosen(tmp_path, capsys):
    from speechlab.data.prepare import prepare_corpus

    prepare_corpus("cmu-arctic", rc.cmu_arctic(tmp_path / "src"), tmp_path / "arctic")
    before = snapshot(tmp_path)
    assert main(["data", "align-tts", str(tmp_path / "arctic"), "--out",
                 str(tmp_path / "tts")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 speakers (bdl, slt)" in err[0] and "--speaker" in err[0], err
    assert main(["data", "align-tts", str(tmp_path / "arctic"), "--out", str(tmp_path / "tts"),
                 "--speaker", "rms"]) == 2
    assert "no speaker 'rms'" in capsys.readouterr().err
    assert snapshot(tmp_path) == before
    assert main(["data", "align-tts", str(tmp_path / "arctic"), "--out", str(tmp_path / "tts"),
                 "--speaker", "bdl", "--voice", "kal", "--no-progress"]) == 0
    info = json.loads((tmp_path / "tts" / "corpus.json").read_text())
    assert info["aligned"]["speaker"] == "bdl"
    assert info["splits"]["train"]["languages"]["en"]["speakers"] == ["bdl"]


def test_bad_input_is_one_line_exit_2_and_nothing_written(lj, tmp_path, capsys):
    cases = [
        ([str(tmp_path / "nothing")], "no corpus.json"),
        ([str(lj), "--voice", "ked"], "invalid choice"),
        ([str(lj), "--max-ratio", "1"], "--max-ratio"),
    ]
    before = snapshot(tmp_path)
    for argv, message in cases:
        assert main(["data", "align-tts", *argv, "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert message in err, (argv, err)
    assert snapshot(tmp_path) == before
    # The source itself, and a corpus already there without --overwrite.
    assert main(["data", "align-tts", str(lj), "--out", str(lj)]) == 2
    assert "is the source corpus" in capsys.readouterr().err
    out = tmp_path / "tts"
    assert main(["data", "align-tts", str(lj), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["data", "align-tts", str(lj), "--out", str(out), "--no-progress"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["data", "align-tts", str(lj), "--out", str(out), "--no-progress",
                 "--overwrite"]) == 0


def test_text_that_does_not_fit_its_audio_stops_the_run_or_is_left_out(lj, tmp_path, capsys,
                                                                       monkeypatch):
    """An utterance whose recording is far longer than its text: raise names it and says how
    to go on; skip leaves it out and counts it."""
    real = al.align_recording

    def one_bad(audio, ref_audio, ref_labels, max_ratio=2.5):
        if "LJ001-0003" in ref_labels.source:
            audio = np.tile(audio, 4)
        return real(audio, ref_audio, ref_labels, max_ratio)

    monkeypatch.setattr(al, "align_recording", one_bad)
    out = tmp_path / "tts"
    assert main(["data", "align-tts", str(lj), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "utterance LJ001-0003 (train) was not aligned" in err and "--on-error skip" in err
    assert not (out / "corpus.json").exists()
    assert main(["data", "align-tts", str(lj), "--out", str(out), "--no-progress",
                 "--on-error", "skip"]) == 0
    assert "aligned 11 utterances" in capsys.readouterr().out
    assert json.loads((out / "corpus.json").read_text())["aligned"]["left_out"] == 1


def test_a_killed_run_resumes_where_it_stopped(lj, tmp_path, monkeypatch):
    real, batches = al._align_batch, []

    def killed_in_the_third(batch, cfg, work, tmp):
        batches.append([it.id for it in batch])
        if len(batches) == 3:
            raise KeyboardInterrupt
        return real(batch, cfg, work, tmp)

    monkeypatch.setattr(al, "_align_batch", killed_in_the_third)
    out = tmp_path / "tts"
    cfg = al.AlignConfig(batch_size=3, workers=1)
    with pytest.raises(KeyboardInterrupt):
        al.align_tts_corpus(lj, out, cfg, progress=False)
    assert (out / al.WORK).is_dir() and not (out / "corpus.json").exists()
    first_run = {u for b in batches[:2] for u in b}
    assert len(first_run) == 6
    batches.clear()
    monkeypatch.setattr(al, "_align_batch", lambda *a: (batches.append([it.id for it in a[0]]),
                                                        real(*a))[1])
    info = al.align_tts_corpus(lj, out, cfg, progress=False)
    again = {u for b in batches for u in b}
    assert len(again) == 6 and not again & first_run  # nothing aligned twice
    assert info["aligned"]["utterances"] == 12 and not (out / al.WORK).exists()
    # Another reference voice is another job: its work is not mixed with this one's.
    assert al._job_record(lj, cfg) != al._job_record(lj, al.AlignConfig(voice="kal"))
