"""The page of ``speechlab serve`` in a real browser: headless Debian Chromium driven by
Playwright, its microphone faked from the tone recording (Chromium loops the file), the page's
Content-Security-Policy in force.

- the microphone path: partial results appear while listening, before the recording ends,
  and the final text equals ``speechlab transcribe`` of the same file (the planted model
  spells it whatever the browser's resampling and start offset do), with the LID bars and
  the decoders early stopping switched off;
- a file streamed by the page, and one posted for a model that reads whole recordings;
- the TTS, attention and lattice panels, each against the API's own answer;
- bad files and empty text: an error state with the server's message, the page still usable.
"""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="browser tests drive Debian's chromium at /usr/bin/chromium; install it with "
           "`apt-get install chromium chromium-driver` (make setup does)")

# Headless, no network of its own (the machine's network is closed: without these Chromium
# keeps trying to reach its services), and a fake microphone playing the test recording.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]


@pytest.fixture(scope="module")
def playwright():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        yield p


def launch(playwright, wav):
    """Chromium whose fake microphone plays ``wav`` (in a loop); Playwright gives each launch a
    fresh temporary --user-data-dir."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM),
                                      args=[*FLAGS, f"--use-file-for-fake-audio-capture={wav}"])


@pytest.fixture(scope="module")
def browser(playwright, tone_wav):
    b = launch(playwright, tone_wav)
    yield b
    b.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-ready=true]", timeout=15000)
    yield page
    context.close()
    assert not errors, errors


def _state(page, panel: str) -> str:
    return page.get_attribute(f"#{panel}-status", "data-state")


def _wait_state(page, panel: str, *states: str, timeout: float = 30000) -> str:
    page.wait_for_selector(", ".join(f"#{panel}-status[data-state={s}]" for s in states),
                           timeout=timeout)
    return _state(page, panel)


def _sent_seconds(page) -> float:
    m = re.search(r"sent ([\d.]+) s", page.text_content("#asr-meta") or "")
    return float(m.group(1)) if m else 0.0


def test_microphone_partials_come_before_the_end_and_the_final_equals_the_cli(page, server,
                                                                              cli_json):
    expected = cli_json("tones", server.wav)["text"]
    assert expected == "the fox"
    page.select_option("#asr-model", "tones")
    page.fill("#asr-tau", "10")
    page.fill("#asr-sth", "1")
    page.click("#asr-record")
    _wait_state(page, "asr", "listening", timeout=15000)
    seen = []  # partial texts shown while listening
    live_words = []  # the partials' words shown while listening
    deadline = time.monotonic() + 20
    # The file is 3.72 s; its last burst ends at 2.7 s and the loop's next one starts at 4.3 s.
    while _sent_seconds(page) < 3.3:
        assert time.monotonic() < deadline, "the page stopped sending audio"
        assert _state(page, "asr") == "listening"
        text = page.text_content("#asr-text")
        if text and (not seen or seen[-1] != text):
            seen.append(text)
        # the partial's words, dashed, each shaded by its confidence as the search stands
        live = page.eval_on_selector_all(
            ".word.live", "ws => ws.map(w => [w.firstChild.textContent, w.dataset.confidence])")
        if live:
            live_words.append(live)
        time.sleep(0.05)
    assert any(0 < len(t) < len(expected) and expected.startswith(t) for t in seen), seen
    assert live_words and all(0 < float(c) <= 1 for shown in live_words for _, c in shown)
    assert any(" ".join(w for w, _ in shown) == expected for shown in live_words), live_words
    page.click("#asr-stop")
    assert _wait_state(page, "asr", "done", "error") == "done", page.text_content("#asr-error")
    assert page.text_content("#asr-text") == expected
    # the LID head leads with English; early stopping switched Hindi's decoder off
    assert "lead" in page.get_attribute(".bar[data-lang=en]", "class")
    assert "off" in page.get_attribute(".chip[data-lang=hi]", "class")
    assert "on" in page.get_attribute(".chip[data-lang=en]", "class")
    assert [w.split()[0] for w in page.locator(".word").all_inner_texts()] == ["the", "fox"]
    assert page.locator(".word.live").count() == 0  # the final's words replace the partial's


def test_a_recording_file_streams_or_posts_to_the_same_text_as_the_cli(page, server, cli_json):
    page.select_option("#asr-model", "tones")
    page.set_input_files("#asr-file", str(server.wav))
    assert _wait_state(page, "asr", "done", "error") == "done", page.text_content("#asr-error")
    assert page.text_content("#asr-text") == cli_json("tones", server.wav)["text"]
    page.select_option("#asr-model", "hf")  # reads whole recordings: posted to /api/transcribe
    # no early stopping without a LID head: its settings are neither usable nor shown
    assert page.is_disabled("#asr-tau") and not page.is_visible("#asr-early")
    page.set_input_files("#asr-file", str(server.wav))
    assert _wait_state(page, "asr", "done", "error") == "done", page.text_content("#asr-error")
    expected = cli_json("hf", server.wav)
    assert page.text_content("#asr-text") == expected["text"]
    assert page.locator(".word").count() == len(expected["words"])
    # a CTC-topology model's words are shaded by their confidence too (the page asks for the
    # lattice's alternatives, which give them)
    page.select_option("#asr-model", "ctc")
    page.set_input_files("#asr-file", str(server.wav))
    assert _wait_state(page, "asr", "done", "error") == "done", page.text_content("#asr-error")
    words = page.locator(".word")
    assert words.count() and words.count() == page.locator(".word[data-confidence]").count()


def test_bad_files_and_empty_text_show_an_error_and_the_page_goes_on(page, server, tmp_path):
    bad = tmp_path / "notes.wav"
    bad.write_bytes(b"RIFF these are not samples")
    page.select_option("#asr-model", "tones")  # decoded in the browser
    page.set_input_files("#asr-file", str(bad))
    assert _wait_state(page, "asr", "error") == "error"
    assert "notes.wav: not an audio file" in page.text_content("#asr-error")
    page.select_option("#asr-model", "hf")  # sent as it is: the server's message
    page.set_input_files("#asr-file", str(bad))
    assert _wait_state(page, "asr", "error") == "error"
    assert "notes.wav" in page.text_content("#asr-error")
    page.set_input_files("#asr-file", str(server.wav))  # and it still works
    assert _wait_state(page, "asr", "done", "error") == "done"
    page.click("#tab-attention")
    page.set_input_files("#attention-file", str(bad))
    assert _wait_state(page, "attention", "error") == "error"
    assert "notes.wav" in page.text_content("#attention-error")
    page.click("#tab-tts")
    page.fill("#tts-text", "   ")
    page.click("#tts-speak")
    assert "Type some text" in page.text_content("#tts-error")


def _inked_pixels(png: bytes) -> int:
    import matplotlib.image

    img = matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]
    return int((img.min(axis=-1) < 0.9).sum())


def test_the_tts_panel_plays_the_speech_and_plots_its_f0_and_spectrogram(page):
    page.click("#tab-tts")
    page.fill("#tts-text", "Hello world.")
    page.click("#tts-speak")
    assert _wait_state(page, "tts", "done", "error") == "done", page.text_content("#tts-error")
    assert page.get_attribute("#tts-audio", "src").startswith("data:audio/wav;base64,")
    duration = page.evaluate("() => new Promise(r => { const a = document.getElementById("
                             "'tts-audio'); a.readyState >= 1 ? r(a.duration) : "
                             "a.addEventListener('loadedmetadata', () => r(a.duration)); })")
    assert 0.3 < duration < 10
    assert "duration" in page.text_content("#tts-meta")
    assert _inked_pixels(page.locator("#tts-f0").screenshot()) > 500  # a drawn F0 track
    assert _inked_pixels(page.locator("#tts-spec").screenshot()) > 20000  # a filled image


def test_the_attention_panel_shows_every_block_with_its_label(page, server):
    page.click("#tab-attention")
    page.select_option("#attention-model", "w2v")
    page.set_input_files("#attention-file", str(server.wav))
    assert _wait_state(page, "attention", "done", "error") == "done"
    blocks = page.locator(".block")
    assert blocks.count() == 6
    labels = [page.text_content(f".block[data-block='{b}'] .pattern") for b in range(1, 7)]
    assert labels[1] == labels[2] == "diagonal"  # the two local blocks
    assert page.locator(".block canvas").count() == 6


def test_the_lattice_panel_shows_viterbi_and_the_best_hypotheses(page, server, cli_json):
    # the recording made in another panel is offered here too
    page.select_option("#asr-model", "tones")
    page.set_input_files("#asr-file", str(server.wav))
    _wait_state(page, "asr", "done")
    page.click("#tab-lattice")
    page.click("#lattice-last")
    assert _wait_state(page, "lattice", "done", "error") == "done", \
        page.text_content("#lattice-error")
    assert page.text_content("#lattice-text") == cli_json("ctc", server.wav)["text"]
    rows = page.locator("#lattice-hyps tbody tr")
    assert rows.count() >= 1
    assert page.locator("#lattice-hyps tr.viterbi").count() == 1
    shares = [float(t.rstrip("%").lstrip("< ")) for t in page.locator("#lattice-hyps .share .value").all_inner_texts()]
    assert all(0 <= s <= 100 for s in shares) and np.isclose(min(sum(shares[:5]), 100), sum(shares[:5]))


def test_a_tab_under_the_pointer_keeps_its_label_readable(page):
    # the page's generic button hover (a light background) must not reach the dark tab bar,
    # where the tab's label is near-white
    page.click("#tab-lattice")
    page.hover("#tab-lattice")
    background = page.eval_on_selector("#tab-lattice", "e => getComputedStyle(e).backgroundColor")
    assert background in ("rgba(0, 0, 0, 0)", "transparent")


def _three_sentences(path):
    import numpy as np
    import soundfile as sf

    from speechlab.testing.tone_rnnt import tone_samples

    sf.write(path, np.concatenate([tone_samples("the fox", lead=0.6, tail=1.6)] * 3), 16000,
             subtype="PCM_16")
    return path


def test_a_recording_with_pauses_shows_its_utterances_as_lines(page, tmp_path):
    page.select_option("#asr-model", "tones")
    page.set_input_files("#asr-file", str(_three_sentences(tmp_path / "three.wav")))
    assert _wait_state(page, "asr", "done", "error") == "done", page.text_content("#asr-error")
    assert page.locator("#asr-text .utterance").all_inner_texts() == ["the fox"] * 3
    assert [w.split()[0] for w in page.locator(".word").all_inner_texts()] == ["the", "fox"] * 3


def test_a_microphone_with_pauses_gives_a_line_per_utterance(playwright, server, tmp_path):
    """A person reads three sentences with pauses into the microphone: the page shows each as
    a line once its pause has passed, while it goes on listening."""
    wav = _three_sentences(tmp_path / "three.wav")  # 13.3 s; the fake microphone loops it
    b = launch(playwright, wav)
    try:
        page = b.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url + "/")
        page.wait_for_selector("body[data-ready=true]", timeout=15000)
        page.select_option("#asr-model", "tones")
        page.click("#asr-record")
        _wait_state(page, "asr", "listening", timeout=15000)
        # the third sentence's last burst ends at 11.4 s of the file, its pause's endpoint
        # comes 1.2 s later (and a chunk); lines are looked for until then and a little more
        page.locator("#asr-text .utterance").nth(2).wait_for(timeout=60000)
        assert _state(page, "asr") == "listening"  # the stream went on after each line
        page.click("#asr-stop")
        assert _wait_state(page, "asr", "done", "error") == "done"
        lines = page.locator("#asr-text .utterance").all_inner_texts()
        assert lines[:3] == ["the fox"] * 3, lines
        assert not errors, errors
    finally:
        b.close()


def test_the_language_allowlist_leaves_the_lid_head_only_those_languages(page, server):
    page.select_option("#asr-model", "tones")
    assert page.is_visible("#asr-allow") and page.is_visible("#asr-early")
    page.uncheck("#asr-allow-list input[value=en]")  # the LID head prefers English
    page.set_input_files("#asr-file", str(server.wav))
    assert _wait_state(page, "asr", "done", "error") == "done", page.text_content("#asr-error")
    assert "hi" in page.text_content("#asr-meta")  # the language shown
    assert "lead" in page.get_attribute(".bar[data-lang=hi]", "class")
    assert page.is_visible("#asr-hotwords-field")
    page.select_option("#asr-model", "hf")  # no LID head: no allowlist; no hotwords either
    assert not page.is_visible("#asr-allow") and not page.is_visible("#asr-hotwords-field")


def test_a_whole_recording_model_hears_the_microphone_in_utterances(playwright, server,
                                                                   tmp_path):
    """Three spoken sentences with pauses into the microphone, for a model that reads whole
    recordings: each utterance comes back once its pause has passed, while the page listens."""
    import soundfile as sf

    from speechlab.testing.audio import have_espeak, spoken_with_pauses

    if not have_espeak():
        pytest.skip("needs espeak-ng")
    audio, _ = spoken_with_pauses()
    wav = tmp_path / "talk.wav"
    sf.write(wav, audio, 16000, subtype="PCM_16")
    b = launch(playwright, wav)
    try:
        page = b.new_page(viewport={"width": 1280, "height": 900})
        page.goto(server.url + "/")
        page.wait_for_selector("body[data-ready=true]", timeout=15000)
        page.select_option("#asr-model", "hf")
        page.click("#asr-record")
        _wait_state(page, "asr", "listening", timeout=15000)
        page.wait_for_selector("#asr-transcript[data-utterances='3']", timeout=60000)
        assert _state(page, "asr") == "listening"
        page.click("#asr-stop")
        assert _wait_state(page, "asr", "done", "error") == "done", \
            page.text_content("#asr-error")
    finally:
        b.close()
