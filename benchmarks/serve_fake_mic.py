"""Speak into ``speechlab serve``'s page as a person would: headless Chromium with its
microphone faked from a recording, against ``speechlab transcribe`` of the same recording.

For each WAV given (16 kHz mono speech), the script writes a copy with a second of silence
before and after (Chromium loops the fake microphone's file; the silence keeps the loop from
running into the next repetition's words), starts ``speechlab serve`` (with no PATH: the shipped
models; or ``--model PATH``), opens its page in Debian's Chromium with that file as the
microphone, records until the speech and half a second of the silence after it have been sent,
stops, and compares the page's final text with ``speechlab transcribe`` of the padded file.

    python benchmarks/serve_fake_mic.py --model en_ctc a.wav b.wav [--json out.json]

Prints one line per recording (same / differs, both texts) and exits 1 if any differs.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]


def _padded(wav: Path, out: Path) -> float:
    """Write ``wav`` with 1 s of silence before and after to ``out``; returns the seconds at
    which the speech ends in it."""
    x, sr = sf.read(wav, dtype="float32")
    if x.ndim > 1:
        x = x.mean(axis=1)
    pad = np.zeros(sr, dtype=np.float32)
    sf.write(out, np.concatenate([pad, x, pad]), sr)
    return 1.0 + len(x) / sr


def _cli_text(model: str, wav: Path, language: str | None) -> str:
    cmd = [sys.executable, "-m", "speechlab", "transcribe", model, str(wav), "--json"]
    if language:
        cmd += ["--language", language]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["text"]


def _page_text(url: str, model_name: str, wav: Path, speech_end: float,
               language: str | None) -> str:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=[*FLAGS, f"--use-file-for-fake-audio-capture={wav}"])
        try:
            page = browser.new_context().new_page()
            page.goto(url)
            page.wait_for_selector("body[data-ready=true]", timeout=30000)
            page.select_option("#asr-model", model_name)
            if language and page.locator("#asr-language").count():
                page.select_option("#asr-language", language)
            page.click("#asr-record")
            page.wait_for_selector("#asr-status[data-state=listening]", timeout=30000)
            deadline = time.monotonic() + speech_end + 60
            while True:
                m = re.search(r"sent ([\d.]+) s", page.text_content("#asr-meta") or "")
                if m and float(m.group(1)) >= speech_end + 0.5:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the page stopped sending audio")
                time.sleep(0.05)
            page.click("#asr-stop")
            page.wait_for_selector("#asr-status[data-state=done], #asr-status[data-state=error]",
                                   timeout=60000)
            return page.text_content("#asr-text") or ""
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    from speechlab.testing.serve_process import serve_process

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("wavs", nargs="+", type=Path)
    p.add_argument("--model", required=True,
                   help="the model's name on the page (a shipped model's name, served with no "
                        "PATH), or a model path, served as it is")
    p.add_argument("--language", default=None, help="language to give (default: the model's)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    path = Path(args.model)
    serve_args = [str(path)] if path.exists() else []
    name = path.name
    results, same = [], True
    with tempfile.TemporaryDirectory(prefix="fake-mic-") as tmp, \
            serve_process([*serve_args, "--port", "0"]) as (url, _):
        for wav in args.wavs:
            padded = Path(tmp) / wav.name
            end = _padded(wav, padded)
            cli = _cli_text(args.model, padded, args.language)
            page = _page_text(url, name, padded, end, args.language)
            ok = page.strip() == cli.strip()
            same = same and ok
            results.append({"wav": str(wav), "cli": cli, "page": page, "same": ok})
            print(f"{'same' if ok else 'DIFFERS'}  {wav.name}\n  cli:  {cli}\n  page: {page}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
