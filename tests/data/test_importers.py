"""Importing a lhotse recipe's manifests into the corpus layout, and merging splits."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from lhotse import Recording, RecordingSet, SupervisionSegment, SupervisionSet

from speechlab.data.corpus import load_cuts
from speechlab.data.importers import ImportConfig, import_lhotse, normalize_language
from speechlab.errors import DataError


def _recipe(tmp_path, sr=16000, languages=("English", "Hindi")):
    """Write a LibriSpeech-like recipe output: two recordings, supervisions with names."""
    recs, sups = [], []
    texts = {"English": "the quick brown fox", "Hindi": "तेज़ भूरी लोमड़ी"}
    for i, lang in enumerate(languages):
        p = tmp_path / f"utt{i}.flac"
        sf.write(p, (np.sin(np.arange(sr) * 0.05 * (i + 1)) * 5000).astype(np.int16), sr)
        recs.append(Recording.from_file(p, recording_id=f"utt{i}"))
        sups.append(SupervisionSegment(f"utt{i}", f"utt{i}", 0.0, 1.0, text=texts[lang],
                                       language=lang, speaker=f"spk{i}"))
    RecordingSet.from_recordings(recs).to_file(tmp_path / "recordings.jsonl.gz")
    SupervisionSet.from_segments(sups).to_file(tmp_path / "supervisions.jsonl.gz")
    return tmp_path / "recordings.jsonl.gz", tmp_path / "supervisions.jsonl.gz"


@pytest.mark.parametrize("tag, norm", [("English", "en"), ("en-IN", "en"), ("hi_IN", "hi"),
                                       ("Gujarati", "gu"), ("ta", "ta"), (None, None)])
def test_normalize_language(tag, norm):
    assert normalize_language(tag) == norm


def test_import_lhotse_and_merge_splits(tmp_path):
    recs, sups = _recipe(tmp_path)
    out = tmp_path / "corpus"
    report = import_lhotse(recs, sups, out, ImportConfig(split="train"))
    assert report.kept == 2
    import_lhotse(recs, sups, out, ImportConfig(split="test"))
    info = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    assert sorted(info["splits"]) == ["test", "train"]
    assert info["languages"] == ["en", "hi"]
    cuts = list(load_cuts(out, "train"))
    assert [c.supervisions[0].language for c in cuts] == ["en", "hi"]
    assert cuts[1].supervisions[0].text == "तेज़ भूरी लोमड़ी"
    assert cuts[0].load_audio().shape == (1, 16000)
    for kind in ("recordings", "supervisions", "cuts"):
        assert (out / f"train_{kind}.jsonl.gz").is_file()


def test_import_lhotse_needs_split_and_files(tmp_path):
    recs, sups = _recipe(tmp_path)
    with pytest.raises(DataError, match="needs a split name"):
        import_lhotse(recs, sups, tmp_path / "c", ImportConfig())
    with pytest.raises(DataError, match=r"nothing\.jsonl\.gz: RecordingSet manifest does not"):
        import_lhotse(tmp_path / "nothing.jsonl.gz", sups, tmp_path / "c",
                      ImportConfig(split="train"))
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(DataError, match=r"bad\.jsonl: not a valid lhotse SupervisionSet"):
        import_lhotse(recs, tmp_path / "bad.jsonl", tmp_path / "c", ImportConfig(split="train"))


def test_import_lhotse_unknown_language_and_sample_rate(tmp_path):
    recs, sups = _recipe(tmp_path, languages=("English", "Hindi"))
    with pytest.raises(DataError, match="unknown language tag 'hi'"):
        import_lhotse(recs, sups, tmp_path / "c",
                      ImportConfig(split="train", known_languages=("en",)))
    report = import_lhotse(recs, sups, tmp_path / "d",
                           ImportConfig(split="train", known_languages=("en",), on_error="skip"))
    assert report.kept == 1 and report.skipped == {"bad transcript or language": 1}
    low = tmp_path / "low"
    low.mkdir()
    recs8, sups8 = _recipe(low, sr=8000)
    with pytest.raises(DataError, match="sample rate 8000 Hz, expected 16000"):
        import_lhotse(recs8, sups8, tmp_path / "e", ImportConfig(split="train"))
    report = import_lhotse(recs8, sups8, tmp_path / "f", ImportConfig(split="train",
                                                                     resample=True))
    assert report.kept == 2
    assert next(iter(load_cuts(tmp_path / "f", "train"))).load_audio().shape == (1, 16000)


def test_supervision_for_unknown_recording(tmp_path):
    recs, _ = _recipe(tmp_path)
    SupervisionSet.from_segments([SupervisionSegment("x", "ghost", 0.0, 1.0, text="boo hoo",
                                                     language="en")]).to_file(
        tmp_path / "ghost.jsonl.gz")
    with pytest.raises(DataError, match="recording 'ghost' is not in the recordings"):
        import_lhotse(recs, tmp_path / "ghost.jsonl.gz", tmp_path / "c",
                      ImportConfig(split="train"))
