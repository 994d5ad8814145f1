"""The embedded TTS corpus builder with a stand-in for festival: splits, budgets,
determinism, interrupted builds; and the label-corpus reader's checks."""

import numpy as np
import pytest
import soundfile as sf

from speechlab.errors import DataError
from speechlab.tts import corpus as tc
from speechlab.tts.corpus import TtsCorpusConfig, load_tts_split, make_tts_corpus
from speechlab.tts.labels import parse_labels

SENTENCES = [f"sentence number {w} is here" for w in
             ("one two three four five six seven eight nine ten eleven twelve thirteen "
              "fourteen fifteen sixteen seventeen eighteen nineteen twenty").split()]


def _fake_festival(items, work):
    """One second of a tone per sentence and one pause label covering it."""
    out = {}
    for k, (utt_id, text) in enumerate(items):
        audio = 0.1 * np.sin(np.arange(16000) * 2 * np.pi * (100 + len(text)) / 16000)
        out[utt_id] = (audio.astype(np.float32),
                       ["0 10000000 x^x-pau+x=x@x_x/A:0_0_0/B:x-x-x@x-x&x-x#x-x$x-x!x-x;x-x|x"])
    return out


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(tc, "festival_synthesize", _fake_festival)
    monkeypatch.setattr(tc, "english_sentences", lambda cfg: list(SENTENCES))


def test_splits_are_disjoint_within_budget_and_deterministic(fake, tmp_path):
    cfg = TtsCorpusConfig(minutes=0.2, dev_fraction=0.25, test_fraction=0.25, batch_size=2)
    a = make_tts_corpus(cfg, tmp_path / "a")
    b = make_tts_corpus(cfg, tmp_path / "b")
    texts = {s: [u.text for u in load_tts_split(a, s)] for s in ("train", "dev", "test")}
    assert len(texts["train"]) == 6 and len(texts["dev"]) == 3 and len(texts["test"]) == 3
    assert not (set(texts["train"]) & set(texts["dev"]) or set(texts["train"]) & set(texts["test"]))
    assert texts == {s: [u.text for u in load_tts_split(b, s)] for s in texts}
    utt = load_tts_split(a, "dev")[0]
    assert utt.wav.is_file() and utt.labels.read_text().startswith("0 10000000 x^x-pau+x")


def test_an_interrupted_build_is_recognisable(fake, monkeypatch, tmp_path):
    cfg = TtsCorpusConfig(minutes=0.2)
    make_tts_corpus(cfg, tmp_path / "c")

    def broken(items, work):
        raise DataError("festival died")

    monkeypatch.setattr(tc, "festival_synthesize", broken)
    with pytest.raises(DataError, match="festival died"):
        make_tts_corpus(cfg, tmp_path / "c", overwrite=True)  # a rebuild that stops half-way
    with pytest.raises(DataError, match="not a complete speechlab corpus"):
        load_tts_split(tmp_path / "c", "train")


def test_label_corpus_without_matching_files_is_refused(tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "l").mkdir()
    (tmp_path / "w" / "a.wav").write_bytes(b"")
    with pytest.raises(DataError, match="a.wav: no matching label file"):
        tc.read_label_corpus(tmp_path / "w", tmp_path / "l")


def test_festival_script_escapes_quotes(tmp_path):
    script = tc.festival_script([("u1", 'Say "hi" \\ now')], tmp_path)
    assert '(SynthText "Say \\"hi\\" \\\\ now")' in script


def test_labels_that_do_not_match_the_wav_say_by_how_much(tmp_path):
    labels = parse_labels(["0 10000000 x^x-pau+x=x@x_x/A:0_0_0/B:x-x-x@x-x&x-x#x-x$x-x!x-x;x-x|x"],
                          source="a.lab")  # one second
    wav = tmp_path / "a.wav"
    sf.write(wav, np.zeros(24000, dtype=np.float32), 16000)  # 1.5 s
    with pytest.raises(DataError, match=r"a\.lab: labels end at 1\.000 s .*\(0\.500 s apart"):
        tc.check_pair(wav, labels, tolerance=0.1)
    assert tc.check_pair(wav, labels, tolerance=0.6) == pytest.approx(1.5)


def test_a_build_keeps_splits_under_other_names_and_replaces_its_own_only_with_overwrite(
        fake, tmp_path):
    import json

    from speechlab.testing.files import snapshot

    out = tmp_path / "c"
    info = {"sample_rate": 16000, "splits": {"extra": {"utterances": 1, "origin": "kaldi:x",
                                                       "languages": {"en": {}}}}}
    out.mkdir()
    (out / "corpus.json").write_text(json.dumps(info))
    cfg = TtsCorpusConfig(minutes=0.2)
    make_tts_corpus(cfg, out)
    listed = json.loads((out / "corpus.json").read_text())["splits"]
    assert sorted(listed) == ["dev", "extra", "test", "train"]
    assert listed["extra"] == info["splits"]["extra"]
    before = snapshot(out)
    with pytest.raises(DataError, match=r"split\(s\) \['dev', 'test', 'train'\] of an earlier "
                                        r"build .* pass --overwrite"):
        make_tts_corpus(cfg, out)
    assert snapshot(out) == before
    make_tts_corpus(cfg, out, overwrite=True)
    assert sorted(json.loads((out / "corpus.json").read_text())["splits"]) == [
        "dev", "extra", "test", "train"]
