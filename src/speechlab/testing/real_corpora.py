"""Small directories in the layout of real corpora, for tests of ``speechlab data prepare``.

Each writer makes a directory as the corpus's distribution unpacks it (file names, transcript
formats, FLAC or WAV, metadata CSV/TSV, sample rate), with a few utterances of synthetic audio
(a tone gliding per word, so utterances differ) and short sentences written for these tests.
Nothing here is from the corpora themselves.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

SENTENCES = {
    "en": ["the cat sat on the warm mat", "we walked to the market today",
           "she reads a book every night", "open the window before noon",
           "the train leaves at seven", "my brother plays the old guitar",
           "rain fell on the quiet town", "they painted the fence green"],
    "hi": ["मैं घर जा रहा हूँ", "आज बहुत बारिश हो रही है", "वह हर रात किताब पढ़ती है",
           "हम सुबह बाज़ार गए", "गाड़ी सात बजे चलेगी", "मेरा भाई गिटार बजाता है",
           "खिड़की खोल दो", "बच्चे बगीचे में खेल रहे हैं"],
    "ta": ["நான் வீட்டுக்கு போகிறேன்", "இன்று மழை பெய்கிறது", "அவள் புத்தகம் படிக்கிறாள்",
           "நாங்கள் சந்தைக்கு சென்றோம்", "ரயில் ஏழு மணிக்கு புறப்படும்",
           "என் தம்பி பாடுகிறான்", "கதவை திற", "குழந்தைகள் விளையாடுகிறார்கள்"],
    "gu": ["હું ઘરે જાઉં છું", "આજે વરસાદ પડે છે", "તે રોજ પુસ્તક વાંચે છે",
           "અમે બજારમાં ગયા", "ગાડી સાત વાગે ઉપડશે", "મારો ભાઈ ગીત ગાય છે",
           "બારી ખોલો", "બાળકો બગીચામાં રમે છે"],
}


def speech_like(text: str, sample_rate: int = 16000, seed: int = 0) -> np.ndarray:
    """Float samples: one gliding tone with a little noise per word of ``text``."""
    rng = np.random.default_rng(seed)
    pieces = []
    for i, word in enumerate(text.split()):
        n = int(sample_rate * (0.12 + 0.03 * len(word)))
        t = np.arange(n) / sample_rate
        f0 = 200 + 40 * ((sum(map(ord, word)) + i) % 9)
        tone = np.sin(2 * np.pi * (f0 + 200 * t) * t) * np.hanning(n)
        pieces += [0.3 * tone + 0.01 * rng.standard_normal(n), np.zeros(int(0.05 * sample_rate))]
    return np.concatenate([np.zeros(int(0.1 * sample_rate)), *pieces]).astype(np.float32)


def _sentence(lang: str, i: int) -> str:
    return SENTENCES[lang][i % len(SENTENCES[lang])]


def librispeech(root: Path, parts: tuple[str, ...] = ("train-clean-5", "dev-clean-2",
                                                      "test-clean"),
                speakers: int = 2, per_chapter: int = 4) -> Path:
    """``root/LibriSpeech/<part>/<speaker>/<chapter>/<speaker>-<chapter>-<nnnn>.flac`` and
    ``<speaker>-<chapter>.trans.txt`` (upper case, as LibriSpeech's are)."""
    base = root / "LibriSpeech"
    k = 0
    for p, part in enumerate(parts):
        for s in range(speakers):
            spk, chap = str(100 + 10 * p + s), str(2000 + s)
            d = base / part / spk / chap
            d.mkdir(parents=True, exist_ok=True)
            lines = []
            for u in range(per_chapter):
                utt = f"{spk}-{chap}-{u:04d}"
                text = _sentence("en", k)
                sf.write(d / f"{utt}.flac", speech_like(text, seed=k), 16000, format="FLAC")
                lines.append(f"{utt} {text.upper()}")
                k += 1
            (d / f"{spk}-{chap}.trans.txt").write_text("\n".join(lines) + "\n")
    return base


FLEURS_CODES = {"en": "en_us", "hi": "hi_in", "ta": "ta_in", "gu": "gu_in"}


def fleurs(root: Path, languages: tuple[str, ...] = ("en", "hi"), per_split: int = 4,
           released: bool = False) -> Path:
    """``root/fleurs/<lang>/<split>/<n>.wav`` and ``metadata/<lang>/<split>.tsv`` (seven
    tab-separated columns: id, file, raw text, text, phonemes, samples, gender), lhotse's
    layout; with ``released``, the Hugging Face release's with its archives unpacked:
    ``<lang>/<split>.tsv`` and ``<lang>/audio/<split>/<n>.wav``."""
    base = root / "fleurs"
    k = 0
    for lang in languages:
        code = FLEURS_CODES[lang]
        for split in ("train", "dev", "test"):
            audio_dir = base / code / "audio" / split if released else base / code / split
            meta_dir = base / code if released else base / "metadata" / code
            audio_dir.mkdir(parents=True, exist_ok=True)
            meta_dir.mkdir(parents=True, exist_ok=True)
            rows = []
            for u in range(per_split):
                text = _sentence(lang, k)
                audio = speech_like(text, seed=k)
                name = f"{1000 + k}.wav"
                sf.write(audio_dir / name, audio, 16000)
                raw = text[0].upper() + text[1:] + "." if lang == "en" else text + "।"
                rows.append("\t".join([str(500 + k), name, raw, text, "_", str(len(audio)),
                                       "FEMALE" if k % 2 else "MALE"]))
                k += 1
            (meta_dir / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return base


def _festvox(d: Path, ids: list[str], texts: list[str], sample_rate: int, seed: int) -> None:
    (d / "wav").mkdir(parents=True, exist_ok=True)
    (d / "etc").mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (utt, text) in enumerate(zip(ids, texts)):
        sf.write(d / "wav" / f"{utt}.wav", speech_like(text, sample_rate, seed + i), sample_rate)
        lines.append(f'( {utt} "{text}" )')
    (d / "etc" / "txt.done.data").write_text("\n".join(lines) + "\n", encoding="utf-8")


INDIC_SPEAKERS = {"hi": "hin_ab", "ta": "tam_sdr", "gu": "guj_dp"}


def cmu_indic(root: Path, languages: tuple[str, ...] = ("hi", "ta"), per_speaker: int = 8,
              english: int = 2) -> Path:
    """``root/cmu_indic/cmu_indic_<speaker>/{wav/<id>.wav, etc/txt.done.data}``: each voice's
    prompts in its script, and ``english`` English prompts (``arctic_*``) as the voices have."""
    base = root / "cmu_indic"
    for j, lang in enumerate(languages):
        spk = INDIC_SPEAKERS[lang]
        ids = [f"{spk}_{i + 1:05d}" for i in range(per_speaker)]
        texts = [_sentence(lang, i) for i in range(per_speaker)]
        ids += [f"arctic_a{i + 1:04d}" for i in range(english)]
        texts += [_sentence("en", i) for i in range(english)]
        _festvox(base / f"cmu_indic_{spk}", ids, texts, 16000, 100 * j)
    return base


def cmu_arctic(root: Path, speakers: tuple[str, ...] = ("slt", "bdl"),
               per_speaker: int = 8) -> Path:
    """``root/cmu_arctic/cmu_us_<speaker>_arctic/{wav,etc}`` at 16 kHz."""
    base = root / "cmu_arctic"
    for j, spk in enumerate(speakers):
        ids = [f"arctic_a{i + 1:04d}" for i in range(per_speaker)]
        _festvox(base / f"cmu_us_{spk}_arctic", ids,
                 [_sentence("en", i + j) for i in range(per_speaker)], 16000, 100 * j)
    return base


def ljspeech(root: Path, utterances: int = 12) -> Path:
    """``root/LJSpeech-1.1/{metadata.csv, wavs/LJ001-<nnnn>.wav}`` at 22050 Hz, the metadata
    with LJSpeech's three '|'-separated columns (id, text, normalised text)."""
    base = root / "LJSpeech-1.1"
    (base / "wavs").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(utterances):
        utt = f"LJ001-{i + 1:04d}"
        text = _sentence("en", i)
        sf.write(base / "wavs" / f"{utt}.wav", speech_like(text, 22050, i), 22050)
        rows.append(f"{utt}|{text[0].upper() + text[1:]}.|{text[0].upper() + text[1:]}.")
    (base / "metadata.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return base


WRITERS = {"librispeech": librispeech, "fleurs": fleurs, "cmu-indic": cmu_indic,
           "cmu-arctic": cmu_arctic, "ljspeech": ljspeech}
