"""festival's voices as the corpus uses them: every voice speaks, at 16 kHz, the same samples
every run; a sentence festival cannot speak comes back empty without taking its batch with it;
missing voices are named with their Debian packages before any work."""

from __future__ import annotations

import numpy as np
import pytest

from speechlab.data import festival
from speechlab.data.festival import FestivalItem, synthesize, to_devanagari
from speechlab.errors import MissingToolError
from speechlab.text.respell import respell

EN = "The weather was fine and the market was full of people."
HI = "आज मौसम अच्छा है और बाजार में बहुत लोग हैं।"


def test_gujarati_and_tamil_become_devanagari_the_hindi_voice_reads():
    assert to_devanagari("ભારત એક દેશ છે") == "भारत एक देश छे"
    # Tamil's short e, its alveolar letters and letters outside the scripts are mapped or dropped.
    assert to_devanagari("பெரிய நாடு abc") == "पेरिय नाटु"
    assert all(0x0900 <= ord(c) < 0x0980 or c == " " for c in to_devanagari("மற்றும் ழ ன"))


@pytest.mark.parametrize("voice", sorted(festival.VOICES))
def test_every_voice_speaks_at_16k_the_same_samples_every_run(voice):
    language = festival.VOICES[voice].language
    # the voices of other languages read English respelt in their spelling
    text = {"hi": HI, "en": EN}.get(language) or respell(EN, language)
    a, b = synthesize([FestivalItem(text, voice)]), synthesize([FestivalItem(text, voice)])
    assert a[0].dtype == np.int16 and np.array_equal(a[0], b[0])
    seconds = len(a[0]) / 16000
    assert 1.5 < seconds < 8.0, seconds
    assert np.sqrt(np.mean(a[0].astype(float) ** 2)) > 300  # speech, not silence


def test_text_reaches_a_voice_in_its_encoding(tmp_path):
    # festival's Czech voice reads ISO 8859-2: UTF-8 bytes of "č" would be read as two letters
    # (the sentence spoken letter by letter, twice as long)
    script = festival._script([FestivalItem("čaj", "czech_dita"), FestivalItem(EN, "kal_diphone")],
                              tmp_path)
    assert "čaj".encode("iso-8859-2") in script and "čaj".encode() not in script
    respelt = respell(EN, "cs")
    czech, = synthesize([FestivalItem(respelt, "czech_dita")])
    english, = synthesize([FestivalItem(EN, "kal_diphone")])
    assert 0.6 < len(czech) / len(english) < 1.6


def test_stretch_slows_the_speech():
    fast, slow = synthesize([FestivalItem(EN, "kal_diphone", 0.8),
                             FestivalItem(EN, "kal_diphone", 1.25)])
    assert len(slow) > 1.3 * len(fast)


def test_a_sentence_festival_cannot_speak_does_not_take_its_batch_with_it():
    # Raw Gujarati letters crash the Hindi voice (the corpus maps them to Devanagari first).
    out = synthesize([FestivalItem(HI, "hindi_NSK_diphone"),
                      FestivalItem("ભારત એક વિશાળ દેશ છે", "hindi_NSK_diphone"),
                      FestivalItem(EN, "ked_diphone")])
    assert len(out[0]) > 16000 and len(out[2]) > 16000
    assert len(out[1]) == 0


def test_missing_voices_are_named_with_their_packages(monkeypatch):
    monkeypatch.setattr(festival, "installed_voices", lambda: frozenset({"kal_diphone"}))
    with pytest.raises(MissingToolError, match="apt-get install festvox-hi-nsk festvox-kdlpc16k"):
        festival.check_voices(["kal_diphone", "ked_diphone", "hindi_NSK_diphone"])


def test_a_killed_parent_leaves_no_festival_and_its_scratch_goes_with_the_next(tmp_path,
                                                                               monkeypatch):
    """SIGKILL a process while festival speaks for it: festival dies with it (Linux's
    parent-death signal, through setpriv), and the scratch directory it left is removed by
    the next process that makes one."""
    import os
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    from speechlab.files import scratch_dir
    from speechlab.processes import dies_with_parent

    if dies_with_parent(["x"]) == ["x"]:
        pytest.skip("no setpriv here: festival cannot be tied to its parent")
    # some 40 s of festival's work: longer than the wait below for it to die
    text = " ".join(["The quick brown fox jumps over the lazy dog near the river bank."] * 400)
    child = subprocess.Popen([sys.executable, "-c",
                              "import sys; from speechlab.tts.synthesis import labels_of_text; "
                              "labels_of_text(sys.argv[1])", text],
                             env={**os.environ, "TMPDIR": str(tmp_path)})

    def festival_of(pid: int) -> list[int]:
        found = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    stat = open(f"/proc/{d}/stat").read()
                except OSError:
                    continue
                name, ppid = stat.split("(", 1)[1].split(")")[0], int(stat.rsplit(")", 1)[1].split()[1])
                if name == "festival" and ppid == pid:
                    found.append(int(d))
        return found

    deadline = time.monotonic() + 60
    while not (speakers := festival_of(child.pid)) and time.monotonic() < deadline:
        assert child.poll() is None, "the child ended before festival was seen"
        time.sleep(0.05)
    assert speakers, "festival never started"
    assert list(tmp_path.glob(".speechlab-festival-*.tmp"))
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") for p in speakers) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [p for p in speakers if os.path.exists(f"/proc/{p}")]
    for p in alive:  # not to leave it running when the check fails
        os.kill(p, signal.SIGKILL)
    assert not alive, "festival outlived its parent"
    left = list(tmp_path.glob(".speechlab-festival-*.tmp"))
    assert left  # SIGKILL: nothing removed it ...
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with scratch_dir("speechlab-festival") as mine:
        assert mine.is_dir() and not any(p.exists() for p in left)  # ... the next one did
    assert not mine.exists()
