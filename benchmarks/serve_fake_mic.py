"""Speak into ``speechlab serve``'s page as a person would: headless Chromium with its
microphone faked from a recording, against ``speechlab transcribe`` of the same audio.

For each WAV given (16 kHz mono speech), the script writes a copy with a second of silence
before and after (Chromium loops the fake microphone's file; the silence keeps the loop from
running into the next repetition's words), starts ``speechlab serve`` (with no PATH: the shipped
models; or ``--model PATH``), opens its page in Debian's Chromium with that file as the
microphone, records until the speech and half a second of the silence after it have been sent,
stops, and compares the page's final text (its utterances, joined) with ``speechlab transcribe
--stream --chunk-ms 100`` of the audio the page sent: the page's way of hearing a recording (the
page keeps its last recording; the script reads it from the page's ``recording`` event and
writes it to a WAV file).

That audio is the file's as Chromium delivers it: the fake device plays the file in a loop from
when it opens, and resamples it to its own rate and the page's 16 kHz, so the page's recording
starts a few milliseconds off the file's start and its samples are not the file's. A shift of
2.5 ms is enough to change a word where a model is unsure. So the check of the page is against
the audio it sent, and the text of ``speechlab transcribe`` on the file itself is printed beside
it (``file``), with each one's WER against ``--reference`` (lines ``WAV<TAB>TEXT``) if given.

    python benchmarks/serve_fake_mic.py --model en_ctc a.wav b.wav [--reference refs.tsv]
        [--hotwords W1,W2] [--json out.json] [--keep DIR] [--screenshots DIR]

Prints one line per recording (same / differs: the page's text against the CLI's on the page's
audio) and exits 1 if any differs.
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


def _cli_text(model: str, wav: Path, language: str | None, stream: bool,
              hotwords: str | None = None) -> str:
    """``speechlab transcribe``'s text of ``wav``: with ``stream``, as the page hears it (the
    file in 100 ms pieces, an utterance a line: endpoints, or voice activity for a model that
    reads whole recordings), the utterances joined by spaces; else the whole file at once."""
    cmd = [sys.executable, "-m", "speechlab", "transcribe", model, str(wav), "--json"]
    if stream:
        cmd += ["--stream", "--chunk-ms", "100"]
    if language:
        cmd += ["--language", language]
    if hotwords:
        cmd += ["--hotwords", hotwords]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    texts = [json.loads(line)["text"] for line in out.strip().splitlines() if line.strip()]
    return " ".join(t for t in texts if t)


def _page_text(url: str, model_name: str, wav: Path, speech_end: float,
               language: str | None, screenshot: Path | None = None,
               hotwords: str | None = None) -> tuple[str, np.ndarray]:
    """The page's final text for ``wav`` played as its microphone, and the audio it sent;
    ``screenshot``: also save the whole page there (PNG) once it has its final text."""
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
            if hotwords:
                page.fill("#asr-hotwords", hotwords)
            page.evaluate("document.addEventListener('recording', "
                          "(e) => { window.sentAudio = Array.from(e.detail.samples); })")
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
            sent = np.asarray(page.evaluate("window.sentAudio || []"), dtype=np.float32)
            if screenshot is not None:
                # from the top: the page scrolls its text into view, and a whole-page picture
                # taken scrolled draws the fixed header where the view was
                page.evaluate("window.scrollTo(0, 0)")
                page.screenshot(path=str(screenshot), full_page=True)
            lines = page.eval_on_selector_all("#asr-text > *", "els => els.map(e => e.textContent)")
            text = " ".join(t.strip() for t in lines if t and t.strip()) if lines else \
                (page.text_content("#asr-text") or "")
            return text, sent
        finally:
            browser.close()


def _wer(reference: str, hypothesis: str, language: str) -> float:
    """WER with both sides normalised as the corpus's figures are (case, punctuation)."""
    from speechlab.metrics.error_rate import wer
    from speechlab.text.normalize import normalize_text

    return wer([normalize_text(reference, language)],
               [normalize_text(hypothesis, language)]).wer


def _language(model: str, given: str | None) -> str:
    """The language the references are normalised for: the one given, else the model's
    first."""
    if given:
        return given
    from speechlab.package import read_card
    from speechlab.shipped import resolve

    return (read_card(resolve(model)).languages or ["en"])[0]


def main(argv: list[str] | None = None) -> int:
    from speechlab.testing.serve_process import serve_process

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("wavs", nargs="+", type=Path)
    p.add_argument("--model", required=True,
                   help="the model's name on the page (a shipped model's name, served with no "
                        "PATH), or a model path, served as it is")
    p.add_argument("--language", default=None, help="language to give (default: the model's)")
    p.add_argument("--reference", type=Path, default=None,
                   help="lines WAV<TAB>TEXT: the words said in each WAV (by its file name)")
    p.add_argument("--keep", type=Path, default=None,
                   help="keep the audio each recording's page sent here (sent-NAME.wav)")
    p.add_argument("--screenshots", type=Path, default=None,
                   help="save the page as each recording left it here (NAME.png)")
    p.add_argument("--hotwords", default=None,
                   help="W1,W2: typed into the page's hotword box, and given to the CLI")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    for folder in (args.keep, args.screenshots):
        if folder:
            folder.mkdir(parents=True, exist_ok=True)
    refs = {}
    if args.reference:
        for line in args.reference.read_text(encoding="utf-8").splitlines():
            if line.strip():
                name, _, text = line.partition("\t")
                refs[Path(name).name] = text
    language = _language(args.model, args.language) if refs else ""
    path = Path(args.model)
    serve_args = [str(path)] if path.exists() else []
    name = path.name
    results, same = [], True
    with tempfile.TemporaryDirectory(prefix="fake-mic-") as tmp, \
            serve_process([*serve_args, "--port", "0"]) as (url, _):
        for wav in args.wavs:
            padded = Path(tmp) / wav.name
            end = _padded(wav, padded)
            shot = args.screenshots / f"{wav.stem}.png" if args.screenshots else None
            page, sent = _page_text(url, name, padded, end, args.language, shot, args.hotwords)
            if not len(sent):
                raise RuntimeError(f"{wav}: the page kept no recording")
            sent_wav = (args.keep or Path(tmp)) / f"sent-{wav.name}"
            sf.write(sent_wav, sent, 16000, subtype="FLOAT")  # the page's float32 samples
            cli = _cli_text(args.model, sent_wav, args.language, True, args.hotwords)
            file_cli = _cli_text(args.model, padded, args.language, True, args.hotwords)
            ok = page.strip() == cli.strip()
            same = same and ok
            row = {"wav": str(wav), "page": page, "cli": cli, "file_cli": file_cli, "same": ok,
                   "sent_seconds": len(sent) / 16000}
            ref = refs.get(wav.name)
            if ref is not None:
                row["reference"] = ref
                row["wer_page"] = _wer(ref, page, language)
                row["wer_file"] = _wer(ref, file_cli, language)
            results.append(row)
            print(f"{'same' if ok else 'DIFFERS'}  {wav.name}\n  page:         {page}\n"
                  f"  cli (sent):   {cli}\n  cli (file):   {file_cli}"
                  + (f"\n  reference:    {ref}  (WER page {row['wer_page']:.0%}, file "
                     f"{row['wer_file']:.0%})" if ref is not None else ""))
    n = len(results)
    print(f"{sum(r['same'] for r in results)} of {n} recordings: the page's text is the CLI's on "
          f"the audio the page sent; {sum(r['page'].strip() == r['file_cli'].strip() for r in results)}"
          f" of {n} also the CLI's on the file itself")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
