"""Make the README's screenshots of ``speechlab serve`` (docs/serve/*.png).

Serves the tiny test models (speechlab.testing: the RNN-T planted to spell "the fox" from
tone bursts, a CTC S1-T1 model with its graph, a wav2vec 2.0 encoder with blocks 2, 3 and 5
made local, a SALAD model; random weights apart from the planted one) and drives each panel
in headless Debian Chromium, the microphone faked from the tone recording.

    PYTHONPATH=src python docs/serve/screenshots.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]


def main() -> int:
    from playwright.sync_api import sync_playwright

    from speechlab.testing.tiny_models import ctc_package, salad_package, wav2vec2_package
    from speechlab.testing.tone_rnnt import MODEL, planted_run, write_tone_wav

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = [planted_run(root / "tones") / "models" / MODEL,
                 ctc_package(root / "ctc_S1-T1"),
                 wav2vec2_package(root / "wav2vec2_local", preset="tiny",
                                  local_blocks=(2, 3, 5), radius=4),
                 salad_package(root / "salad_tiny")]
        wav = write_tone_wav(root / "the_fox.wav")
        server = subprocess.Popen([sys.executable, "-m", "speechlab", "serve", *map(str, paths),
                                   "--port", "0"], stdout=subprocess.PIPE, text=True)
        try:
            url = None
            while url is None:
                line = server.stdout.readline()
                if not line:
                    raise RuntimeError("speechlab serve did not start")
                if "http://" in line:
                    url = line.split()[2]
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                            args=[*FLAGS, f"--use-file-for-fake-audio-capture={wav}"])
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(url)
                page.wait_for_selector("body[data-ready=true]")
                page.fill("#asr-tau", "10")
                page.fill("#asr-sth", "1")
                page.click("#asr-record")
                page.wait_for_selector("#asr-status[data-state=listening]")
                # mid-way: the partial's words shown live (dashed, shaded by confidence)
                page.locator(".word.live").nth(1).wait_for(timeout=60000)
                page.screenshot(path=HERE / "asr.png")
                time.sleep(1.4)
                page.click("#asr-stop")
                page.wait_for_selector("#asr-status[data-state=done]")

                page.click("#tab-tts")
                page.click("#tts-speak")
                page.wait_for_selector("#tts-status[data-state=done]", timeout=60000)
                page.set_viewport_size({"width": 1280, "height": 860})
                page.screenshot(path=HERE / "tts.png")

                page.set_viewport_size({"width": 1280, "height": 960})
                page.click("#tab-attention")
                page.click("#attention-last")
                page.wait_for_selector("#attention-status[data-state=done]", timeout=60000)
                page.screenshot(path=HERE / "attention.png")

                page.set_viewport_size({"width": 1280, "height": 740})
                page.click("#tab-lattice")
                page.click("#lattice-last")
                page.wait_for_selector("#lattice-status[data-state=done]", timeout=60000)
                page.screenshot(path=HERE / "lattice.png")
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=10)
    for name in ("asr", "tts", "attention", "lattice"):
        path = HERE / f"{name}.png"
        shrink(path)
        print(f"{path}: {path.stat().st_size / 1024:.0f} KB")
    return 0


def shrink(path: Path) -> None:
    """256 colours (the UI has few; the spectrogram's noise is what makes a PNG large)."""
    from PIL import Image

    with Image.open(path) as img:
        small = img.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


if __name__ == "__main__":
    sys.exit(main())
