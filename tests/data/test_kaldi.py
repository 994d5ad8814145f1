"""Kaldi data-dir import: a small dir written here (plain, relative and piped wav.scp entries,
utt2lang, segments) and each malformed variant, which must name its file and line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechlab.data.corpus import load_cuts
from speechlab.data.importers import ImportConfig, import_kaldi
from speechlab.data.kaldi import read_kaldi_dir
from speechlab.errors import DataError

needs_sox = pytest.mark.skipif(shutil.which("sox") is None, reason="needs sox")


def _tone(seconds: float, freq: float, sr: int = 16000) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (np.sin(2 * np.pi * freq * t) * 8000).astype(np.int16)


def _write(d: Path, name: str, lines: list[str]) -> None:
    (d / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@pytest.fixture
def kaldi_dir(tmp_path) -> Path:
    audio = tmp_path / "audio"
    audio.mkdir()
    sf.write(audio / "a.wav", _tone(1.0, 300), 16000, subtype="PCM_16")
    sf.write(audio / "b.wav", _tone(1.5, 400), 16000, subtype="PCM_16")
    sf.write(audio / "c.flac", _tone(0.5, 500), 16000, subtype="PCM_16")
    d = tmp_path / "train"
    d.mkdir()
    _write(d, "wav.scp", [
        f"rec_a {audio / 'a.wav'}",
        "rec_b ../audio/b.wav",  # relative to the data dir
        f"rec_c sox {audio / 'c.flac'} -t wav - |",  # piped command
    ])
    _write(d, "text", ["rec_a hello there my friend", "rec_b नमस्ते मेरे दोस्त",
                       "rec_c வணக்கம் நண்பரே"])
    _write(d, "utt2spk", ["rec_a spk1", "rec_b spk2", "rec_c spk3"])
    _write(d, "utt2lang", ["rec_a en", "rec_b hi-IN", "rec_c Tamil"])
    return d


@needs_sox
def test_import_kaldi(kaldi_dir, tmp_path):
    out = tmp_path / "corpus"
    report = import_kaldi(kaldi_dir, out)
    assert report.kept == 3 and report.split == "train" and not report.skipped
    cuts = {c.id: c for c in load_cuts(out, "train")}
    assert sorted(cuts) == ["rec_a", "rec_b", "rec_c"]
    assert {c.id: c.supervisions[0].language for c in cuts.values()} == {
        "rec_a": "en", "rec_b": "hi", "rec_c": "ta"}
    assert cuts["rec_b"].supervisions[0].speaker == "spk2"
    assert cuts["rec_b"].supervisions[0].text == "नमस्ते मेरे दोस्त"
    assert abs(cuts["rec_b"].duration - 1.5) < 1e-6
    # The piped command ran once; its audio is stored and equals the source.
    piped = Path(cuts["rec_c"].recording.sources[0].source)
    assert piped.parent == out / "wav" / "train"
    np.testing.assert_array_equal(sf.read(piped, dtype="int16")[0], _tone(0.5, 500))
    np.testing.assert_allclose(cuts["rec_a"].load_audio()[0], _tone(1.0, 300) / 32768, atol=1e-6)
    info = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    assert info["splits"]["train"]["utterances"] == 3
    assert info["splits"]["train"]["origin"].startswith("kaldi:")


@needs_sox
def test_import_kaldi_with_segments(kaldi_dir, tmp_path):
    _write(kaldi_dir, "segments", ["u1 rec_b 0.0 0.5", "u2 rec_b 0.5 -1", "u3 rec_a 0.25 0.75"])
    _write(kaldi_dir, "text", ["u1 पहला हिस्सा", "u2 दूसरा हिस्सा", "u3 the third part"])
    _write(kaldi_dir, "utt2spk", ["u1 spk2", "u2 spk2", "u3 spk1"])
    _write(kaldi_dir, "utt2lang", ["u1 hi", "u2 hi", "u3 en"])
    out = tmp_path / "seg"
    report = import_kaldi(kaldi_dir, out, ImportConfig(split="dev"))
    assert report.kept == 3
    cuts = {c.id: c for c in load_cuts(out, "dev")}
    assert (cuts["u1"].start, cuts["u1"].duration) == (0.0, 0.5)
    assert (cuts["u2"].start, cuts["u2"].duration) == (0.5, 1.0)  # -1: to the end
    assert cuts["u1"].recording.id == cuts["u2"].recording.id == "rec_b"
    np.testing.assert_allclose(cuts["u3"].load_audio()[0],
                               _tone(1.0, 300)[4000:12000] / 32768, atol=1e-6)


def test_language_from_option_or_error(kaldi_dir, tmp_path):
    (kaldi_dir / "utt2lang").unlink()
    _write(kaldi_dir, "wav.scp", [line for line in (kaldi_dir / "wav.scp").read_text().splitlines()
                                  if "sox" not in line])
    _write(kaldi_dir, "text", ["rec_a hello there my friend", "rec_b नमस्ते मेरे दोस्त"])
    _write(kaldi_dir, "utt2spk", ["rec_a spk1", "rec_b spk2"])
    with pytest.raises(DataError, match="utterance 'rec_a': no language tag"):
        import_kaldi(kaldi_dir, tmp_path / "x")
    report = import_kaldi(kaldi_dir, tmp_path / "y", ImportConfig(language="hi"))
    assert report.kept == 2


MALFORMED = [
    # (file to rewrite, new lines, expected message regex)
    ("utt2spk", ["rec_a spk1", "rec_b", "rec_c spk3"], r"utt2spk:2: expected '<id> <value>'"),
    ("text", ["rec_a hello there", "rec_b more words", "rec_a again"],
     r"text:3: duplicate id 'rec_a' \(first on line 1\)"),
    ("utt2spk", ["rec_a spk1", "rec_c spk3"], r"text:2: utterance 'rec_b' has no speaker"),
    ("utt2spk", ["rec_a spk1", "rec_b spk2", "rec_c spk3", "rec_d spk4"],
     r"utt2spk:4: utterance 'rec_d' has no transcript"),
    ("utt2lang", ["rec_a en", "rec_c ta"], r"text:2: utterance 'rec_b' has no language"),
    ("wav.scp", ["rec_a /x/a.wav", "rec_c /x/c.wav"], r"text:2: utterance 'rec_b' is not in wav"),
    ("wav.scp", ["rec_a /x/a.wav", "rec_b raw.ark:1234", "rec_c /x/c.wav"],
     r"wav\.scp:2: 'raw\.ark:1234' is an ark offset"),
    ("segments", ["rec_a rec_a 0 1", "rec_b rec_b 0.5 zero", "rec_c rec_c 0 1"],
     r"segments:2: start/end '0\.5' 'zero' are not numbers"),
    ("segments", ["rec_a rec_a 0 1", "rec_b rec_b 0.8 0.2", "rec_c rec_c 0 1"],
     r"segments:2: segment 'rec_b' has start 0\.8 and end 0\.2"),
    ("segments", ["rec_a rec_a 0 1", "rec_b rec_x 0 1", "rec_c rec_c 0 1"],
     r"segments:2: recording 'rec_x' of utterance 'rec_b' is not in wav\.scp"),
    ("segments", ["rec_a rec_a 0 1", "rec_b rec_b 0", "rec_c rec_c 0 1"],
     r"segments:2: expected '<utt> <recording> <start> <end>'"),
]


@pytest.mark.parametrize("name, lines, message", MALFORMED,
                         ids=[f"{m[0]}-{i}" for i, m in enumerate(MALFORMED)])
def test_malformed_dir_names_file_and_line(kaldi_dir, name, lines, message):
    _write(kaldi_dir, name, lines)
    with pytest.raises(DataError, match=message) as e:
        read_kaldi_dir(kaldi_dir)
    assert str(kaldi_dir) in str(e.value)


def test_missing_required_file(kaldi_dir):
    (kaldi_dir / "utt2spk").unlink()
    with pytest.raises(DataError, match=r"train/utt2spk: missing"):
        read_kaldi_dir(kaldi_dir)
    with pytest.raises(DataError, match="not a directory"):
        read_kaldi_dir(kaldi_dir / "nope")


@needs_sox
def test_bad_audio_raises_or_is_skipped(kaldi_dir, tmp_path):
    sf.write(kaldi_dir.parent / "audio" / "b.wav", _tone(1.0, 400, sr=8000), 8000)
    _write(kaldi_dir, "wav.scp", [
        f"rec_a {kaldi_dir.parent / 'audio' / 'a.wav'}",
        "rec_b ../audio/b.wav",
        "rec_c false |",  # a command that fails
    ])
    with pytest.raises(DataError, match=r"wav\.scp:3 \(utterance 'rec_c'\): command failed"):
        import_kaldi(kaldi_dir, tmp_path / "strict")
    report = import_kaldi(kaldi_dir, tmp_path / "lenient", ImportConfig(on_error="skip"))
    assert report.kept == 1
    assert report.skipped == {"bad audio": 2}  # one per utterance, counted once
    assert any("8000 Hz, expected 16000" in e for e in report.examples)
    assert [c.id for c in load_cuts(tmp_path / "lenient", "train")] == ["rec_a"]
    # With resampling the 8 kHz file is kept and read at 16 kHz.
    report = import_kaldi(kaldi_dir, tmp_path / "resampled",
                          ImportConfig(on_error="skip", resample=True))
    assert report.kept == 2
    cut = next(c for c in load_cuts(tmp_path / "resampled", "train") if c.id == "rec_b")
    assert cut.sampling_rate == 16000 and cut.load_audio().shape == (1, 16000)


def test_empty_transcript_is_skipped_or_raised(kaldi_dir, tmp_path):
    _write(kaldi_dir, "wav.scp", [f"rec_a {kaldi_dir.parent / 'audio' / 'a.wav'}",
                                  "rec_b ../audio/b.wav"])
    _write(kaldi_dir, "text", ["rec_a", "rec_b नमस्ते मेरे दोस्त"])
    _write(kaldi_dir, "utt2spk", ["rec_a spk1", "rec_b spk2"])
    _write(kaldi_dir, "utt2lang", ["rec_a en", "rec_b hi"])
    with pytest.raises(DataError, match="utterance 'rec_a': empty transcript"):
        import_kaldi(kaldi_dir, tmp_path / "a")
    report = import_kaldi(kaldi_dir, tmp_path / "b", ImportConfig(on_error="skip"))
    assert report.kept == 1 and report.skipped == {"bad transcript or language": 1}


# ---------------------------------------------------------------------------------------------
# No import loses or half-writes data.

from speechlab.testing.files import snapshot  # noqa: E402


@needs_sox
def test_an_existing_split_is_replaced_only_with_overwrite(kaldi_dir, tmp_path):
    out = tmp_path / "corpus"
    import_kaldi(kaldi_dir, out)
    before = snapshot(out)
    # A smaller import of the same split: refused before any work, nothing changes.
    _write(kaldi_dir, "wav.scp", [f"rec_a {kaldi_dir.parent / 'audio' / 'a.wav'}"])
    _write(kaldi_dir, "text", ["rec_a hello"])
    _write(kaldi_dir, "utt2spk", ["rec_a spk1"])
    _write(kaldi_dir, "utt2lang", ["rec_a en"])
    with pytest.raises(DataError, match=r"already holds split 'train' \(3 utterances, from "
                                        r"kaldi:.*\); pass --overwrite"):
        import_kaldi(kaldi_dir, out)
    assert snapshot(out) == before
    # Under another name it merges; with overwrite it replaces (piped audio included).
    import_kaldi(kaldi_dir, out, ImportConfig(split="extra"))
    report = import_kaldi(kaldi_dir, out, overwrite=True)
    assert report.kept == 1 and [c.id for c in load_cuts(out, "train")] == ["rec_a"]
    info = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    assert {s: d["utterances"] for s, d in info["splits"].items()} == {"train": 1, "extra": 1}
    assert not list(out.glob(".import-*"))


@needs_sox
def test_a_failed_piped_import_leaves_nothing_behind(kaldi_dir, tmp_path):
    _write(kaldi_dir, "wav.scp", [
        f"rec_a sox {kaldi_dir.parent / 'audio' / 'a.wav'} -t wav - |",
        f"rec_b sox {kaldi_dir.parent / 'audio' / 'b.wav'} -t wav - |",
        "rec_c false |",  # the third command fails
    ])
    out = tmp_path / "corpus"
    with pytest.raises(DataError, match=r"wav\.scp:3 .*command failed"):
        import_kaldi(kaldi_dir, out)
    assert not out.exists()  # created by the import, removed again
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(DataError, match="command failed"):
        import_kaldi(kaldi_dir, out)
    assert snapshot(out) == {"keep.txt": snapshot(out)["keep.txt"]}
    # Skipping the bad one, the piped audio of the others ends up in place, and only it.
    report = import_kaldi(kaldi_dir, out, ImportConfig(on_error="skip"))
    assert report.kept == 2 and report.skipped == {"bad audio": 1}
    assert sorted(p.name for p in (out / "wav" / "train").iterdir()) == ["rec_a.wav", "rec_b.wav"]
    assert all(Path(c.recording.sources[0].source).is_file() for c in load_cuts(out, "train"))
    assert not list(out.glob(".import-*"))


def test_the_staging_dir_of_a_killed_import_is_removed(kaldi_dir, tmp_path):
    out = tmp_path / "corpus"
    dead = out / ".import-train-999999999-abc.tmp" / "wav" / "train"  # pid gone
    dead.mkdir(parents=True)
    (dead / "x.wav").write_bytes(b"half")
    _write(kaldi_dir, "wav.scp", [f"rec_a {kaldi_dir.parent / 'audio' / 'a.wav'}"])
    _write(kaldi_dir, "text", ["rec_a hello"])
    _write(kaldi_dir, "utt2spk", ["rec_a spk1"])
    _write(kaldi_dir, "utt2lang", ["rec_a en"])
    import_kaldi(kaldi_dir, out)
    assert not list(out.glob(".import-*"))


def test_truncated_or_non_finite_command_output_is_refused(kaldi_dir, tmp_path):
    from speechlab.testing.audio import nonfinite_wav

    a = kaldi_dir.parent / "audio" / "a.wav"
    for value, message in [(f"head -c 1000 {a} |", r"wav\.scp:1 .*command output is truncated: "
                                                    r"its WAV header declares 32000 data bytes "
                                                    r"but 956 came"),
                           (f"cat {nonfinite_wav(tmp_path / 'nan.wav')} |",
                            r"wav\.scp:1 .*100 non-finite sample value")]:
        _write(kaldi_dir, "wav.scp", [f"rec_a {value}"])
        _write(kaldi_dir, "text", ["rec_a hello"])
        _write(kaldi_dir, "utt2spk", ["rec_a spk1"])
        _write(kaldi_dir, "utt2lang", ["rec_a en"])
        with pytest.raises(DataError, match=message):
            import_kaldi(kaldi_dir, tmp_path / "c")
        assert not (tmp_path / "c").exists()


def test_a_bad_recording_counts_each_of_its_utterances_once(kaldi_dir, tmp_path):
    # One unreadable recording holding three utterances, one good recording with one.
    (kaldi_dir.parent / "audio" / "broken.wav").write_bytes(b"RIFF not really a wav")
    _write(kaldi_dir, "wav.scp", [f"rec_a {kaldi_dir.parent / 'audio' / 'a.wav'}",
                                  f"rec_x {kaldi_dir.parent / 'audio' / 'broken.wav'}"])
    _write(kaldi_dir, "segments", ["u1 rec_x 0 0.2", "u2 rec_x 0.2 0.4", "u3 rec_x 0.4 -1",
                                   "u4 rec_a 0 0.5"])
    _write(kaldi_dir, "text", ["u1 one", "u2 two", "u3 three", "u4 four"])
    _write(kaldi_dir, "utt2spk", ["u1 s", "u2 s", "u3 s", "u4 s"])
    _write(kaldi_dir, "utt2lang", ["u1 en", "u2 en", "u3 en", "u4 en"])
    report = import_kaldi(kaldi_dir, tmp_path / "c", ImportConfig(on_error="skip"))
    assert report.kept == 1
    assert report.total_skipped == 3 and report.skipped == {"bad audio": 3}
    assert sorted(report.dropped) == ["u1", "u2", "u3"]
    assert len(report.examples) == 1  # one message for the recording


@pytest.mark.parametrize("split", ["../escape", ".hidden", "a/b", ".."])
def test_split_names_that_are_not_file_names_are_refused(split):
    from speechlab.errors import ConfigError

    with pytest.raises(ConfigError, match="split name"):
        ImportConfig(split=split)


@needs_sox
def test_a_byte_order_mark_is_not_part_of_the_first_utterance_id(kaldi_dir, tmp_path):
    """Editors on Windows start UTF-8 files with a BOM (and end lines with CRLF); Kaldi's files
    never hold one, so it is stripped rather than read into the first id, which then matched
    no other file's."""
    for name in ("wav.scp", "text", "utt2spk", "utt2lang"):
        path = kaldi_dir / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    out = tmp_path / "corpus"
    report = import_kaldi(kaldi_dir, out)
    assert report.kept == 3 and not report.skipped
    cuts = {c.id: c for c in load_cuts(out, "train")}
    assert sorted(cuts) == ["rec_a", "rec_b", "rec_c"]
    assert cuts["rec_a"].supervisions[0].text == "hello there my friend"
    assert cuts["rec_a"].supervisions[0].speaker == "spk1"
    assert cuts["rec_a"].supervisions[0].language == "en"
