"""Real corpora into the speechlab corpus layout: ``speechlab data prepare CORPUS SRC_DIR --out DIR``.

Users of icefall and ESPnet start from a recipe per corpus; these are speechlab's, on lhotse's
recipes (``lhotse.recipes.prepare_*``), never downloading: the user points at the corpus they
have, unpacked as its distribution unpacks.

| CORPUS | what SRC_DIR holds | splits | languages |
|---|---|---|---|
| ``librispeech`` | ``train-clean-100/ dev-clean/ test-clean/ ...`` (``*.trans.txt`` + FLAC) | its parts: ``train-*`` -> train, ``dev-clean`` -> dev, ``test-clean`` -> test, the rest under their own names | en |
| ``fleurs`` | ``{en_us,hi_in,ta_in,gu_in}/{train,dev,test}/*.wav`` + ``metadata/<lang>/<split>.tsv`` (lhotse's layout), or ``<lang>/<split>.tsv`` + ``<lang>/audio/<split>/*.wav`` (the release's, archives unpacked) | its own | en, hi, ta, gu (others are left out) |
| ``cmu-indic`` | ``cmu_indic_<speaker>/{wav,etc}`` (``etc/txt.done.data``) | made: per speaker, every 20th utterance test, the next dev | hi, ta, gu; English prompts as en (others left out) |
| ``ljspeech`` | ``metadata.csv`` + ``wavs/*.wav`` | made, as for cmu-indic | en |
| ``cmu-arctic`` | ``cmu_us_<speaker>_arctic/{wav,etc}`` | made, as for cmu-indic | en |

On the way in, every split goes through the importer of :mod:`speechlab.data.importers`: audio
is validated and resampled to 16 kHz on load where the corpus has another rate (lhotse reads it
so; nothing is copied), long recordings are cut by their supervisions (one cut per utterance),
and each transcript is normalised as the embedded corpus's are
(:func:`speechlab.text.normalize.normalize_text`: Unicode NFC, lowercase for Latin script,
punctuation removed, digits kept; the corpus's own text is kept in ``custom.raw_text``). What a
prepared corpus was made from, and the normalisation, are written into its ``corpus.json``.

Before any work, the layout is checked: a directory that is not the corpus, a part without
transcripts, a transcript whose audio is missing, languages the corpus does not hold: one
:class:`~speechlab.errors.DataError` naming what is missing (exit 2), and nothing written.
Splits the output directory already holds are replaced only with ``overwrite``.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from speechlab.data.importers import (
    ImportConfig,
    ImportReport,
    check_split_free,
    finish_import,
    normalize_language,
    staging,
)
from speechlab.errors import DataError
from speechlab.files import atomic_write_json
from speechlab.text.normalize import normalize_text

log = logging.getLogger(__name__)

NORMALISATION = ("speechlab.text.normalize.normalize_text: Unicode NFC, lowercase (Latin "
                 "script), punctuation removed, digits kept, spaces collapsed; the corpus's own "
                 "text is in custom.raw_text")

# manifests by split: {split: (recordings, supervisions)}
Manifests = dict[str, tuple[list[Any], list[Any]]]


@dataclass(frozen=True)
class RealCorpus:
    """One corpus speechlab prepares: how to check its layout and how to read it (through
    lhotse's recipe) into manifests by split."""

    name: str
    what: str
    check: Callable[[Path, Sequence[str]], None]
    read: Callable[[Path, Sequence[str]], Manifests]
    languages: tuple[str, ...]


def _quiet(fn: Callable[[], Any]) -> Any:
    """Run a lhotse recipe with its progress prints and bars kept off the terminal; a failure
    inside it becomes one DataError."""
    sink = io.StringIO()
    logging.disable(logging.INFO)  # its per-part INFO lines; warnings still show
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return fn()
    except DataError:
        raise
    except (AssertionError, ValueError, KeyError, OSError, RuntimeError, IndexError) as e:
        raise DataError(f"the corpus could not be read ({type(e).__name__}: {e})") from None
    finally:
        logging.disable(logging.NOTSET)


def _missing(what: str, src: Path, hint: str) -> DataError:
    return DataError(f"{src}: {what} is missing; {hint}")


def _made_splits(utterances: Iterable[tuple[str, Any]]) -> dict[str, list[Any]]:
    """Per group (a speaker, or a speaker's language), utterances in id order: every 20th to
    test, the one after it to dev, the rest to train (5% and 5%, deterministic, no utterance
    in two splits)."""
    groups: dict[str, list[Any]] = {}
    for group, sup in utterances:
        groups.setdefault(group, []).append(sup)
    out: dict[str, list[Any]] = {"train": [], "dev": [], "test": []}
    for sups in groups.values():
        for i, sup in enumerate(sorted(sups, key=lambda s: s.id)):
            out["test" if i % 20 == 0 else "dev" if i % 20 == 1 else "train"].append(sup)
    return out


def _by_split(recordings: Iterable[Any], splits: dict[str, list[Any]]) -> Manifests:
    recs = {r.id: r for r in recordings}
    return {split: ([recs[rid] for rid in sorted({s.recording_id for s in sups})], sups)
            for split, sups in splits.items() if sups}


# --------------------------------------------------------------------------------------------
# LibriSpeech


def _librispeech_parts(src: Path) -> list[str]:
    from lhotse.recipes.librispeech import LIBRISPEECH, MINI_LIBRISPEECH

    return sorted(p.name for p in src.iterdir() if p.is_dir()
                  and p.name in (*LIBRISPEECH, *MINI_LIBRISPEECH))


def _check_librispeech(src: Path, languages: Sequence[str]) -> None:
    parts = _librispeech_parts(src)
    if not parts:
        raise _missing("every LibriSpeech part (train-clean-100/, dev-clean/, test-clean/, ...)",
                       src, "give the LibriSpeech/ directory the archives unpack into")
    for part in parts:
        transcripts = sorted((src / part).rglob("*.trans.txt"))
        if not transcripts:
            raise _missing(f"{part}/*/*/*.trans.txt (the transcripts)", src,
                           "a LibriSpeech part holds SPEAKER/CHAPTER/SPEAKER-CHAPTER.trans.txt")
        for trans in transcripts:
            for n, line in enumerate(trans.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                utt, _, text = line.strip().partition(" ")
                if not text.strip():
                    raise DataError(f"{trans}:{n}: utterance {utt!r} has no transcript")
                flac = trans.parent / f"{utt}.flac"
                if not flac.is_file():
                    raise _missing(f"{flac.relative_to(src)} (the audio of {trans.name}:{n})",
                                   src, "every transcript line needs its FLAC file")


def _librispeech_split(part: str) -> str:
    if part.startswith("train"):
        return "train"
    return {"dev-clean": "dev", "dev-clean-2": "dev", "test-clean": "test"}.get(part, part)


def _read_librispeech(src: Path, languages: Sequence[str]) -> Manifests:
    from lhotse.recipes import prepare_librispeech

    parts = _librispeech_parts(src)
    out = _quiet(lambda: prepare_librispeech(src, dataset_parts=parts, output_dir=None))
    manifests: Manifests = {}
    for part, m in sorted(out.items()):
        split = _librispeech_split(part)
        recs, sups = manifests.setdefault(split, ([], []))
        recs.extend(m["recordings"])
        sups.extend(replace(s, language="en") for s in m["supervisions"])
    return manifests


# --------------------------------------------------------------------------------------------
# FLEURS

FLEURS_LANGUAGES = {"en": "en_us", "hi": "hi_in", "ta": "ta_in", "gu": "gu_in"}


def _fleurs_langs(src: Path, languages: Sequence[str]) -> list[str]:
    return [lang for lang in languages if (src / FLEURS_LANGUAGES[lang]).is_dir()]


def _fleurs_paths(src: Path, code: str, split: str) -> tuple[Path, Path]:
    """(transcripts TSV, audio folder) of one language's split: lhotse's layout
    (``metadata/<lang>/<split>.tsv``, ``<lang>/<split>/``) or the Hugging Face release's, its
    audio archives unpacked (``<lang>/<split>.tsv``, ``<lang>/audio/<split>/``)."""
    lhotse = (src / "metadata" / code / f"{split}.tsv", src / code / split)
    hf = (src / code / f"{split}.tsv", src / code / "audio" / split)
    return hf if not lhotse[0].is_file() and hf[0].is_file() else lhotse


def _check_fleurs(src: Path, languages: Sequence[str]) -> None:
    present = _fleurs_langs(src, languages)
    if not present:
        raise _missing(f"every FLEURS language directory of {list(languages)} "
                       f"({', '.join(FLEURS_LANGUAGES[l] + '/' for l in languages)})", src,
                       "give the directory that holds <lang>/ and metadata/<lang>/")
    for lang in present:
        code = FLEURS_LANGUAGES[lang]
        for split in ("train", "dev", "test"):
            tsv, audio = _fleurs_paths(src, code, split)
            if not tsv.is_file():
                raise _missing(f"metadata/{code}/{split}.tsv (the {code} {split} transcripts)",
                               src, "FLEURS keeps its transcripts in metadata/<lang>/<split>.tsv "
                               "(or <lang>/<split>.tsv as released)")
            for n, line in enumerate(tsv.read_text(encoding="utf-8").splitlines(), 1):
                cols = line.rstrip("\n").split("\t")
                if len(cols) != 7:
                    raise DataError(f"{tsv}:{n}: {len(cols)} tab-separated columns, FLEURS has 7 "
                                    "(id, file, raw text, text, phonemes, samples, gender)")
                wav = audio / Path(cols[1]).with_suffix(".wav").name
                if not wav.is_file():
                    raise _missing(f"{wav.relative_to(src)} (the audio of {tsv.name}:{n})", src,
                                   "every metadata line needs its WAV file")


def _lhotse_view(src: Path, codes: Sequence[str], view: Path) -> Path:
    """``view`` laid out as lhotse's recipe reads FLEURS, by symbolic links into ``src``."""
    for code in codes:
        for split in ("train", "dev", "test"):
            tsv, audio = _fleurs_paths(src, code, split)
            (view / "metadata" / code).mkdir(parents=True, exist_ok=True)
            (view / code).mkdir(parents=True, exist_ok=True)
            (view / "metadata" / code / f"{split}.tsv").symlink_to(tsv.resolve())
            (view / code / split).symlink_to(audio.resolve(), target_is_directory=True)
    return view


def _read_fleurs(src: Path, languages: Sequence[str]) -> Manifests:
    import tempfile

    from lhotse.recipes import prepare_fleurs

    codes = [FLEURS_LANGUAGES[l] for l in _fleurs_langs(src, languages)]
    with tempfile.TemporaryDirectory(prefix="speechlab-fleurs-") as tmp:
        view = _lhotse_view(src, codes, Path(tmp) / "view")
        # lhotse's recipe insists on writing its own manifests somewhere
        out = _quiet(lambda: prepare_fleurs(view, output_dir=Path(tmp) / "out",
                                            languages=codes))
        manifests: Manifests = {}
        for code, by_split in out.items():
            for split, m in by_split.items():
                recs, sups = manifests.setdefault(split, ([], []))
                # FLEURS's recording ids are its file names, unique only within a language;
                # the audio is read where it is, not through the links (resolved while they
                # exist)
                recs.extend(replace(r, id=f"{code}-{r.id}", sources=[
                    replace(x, source=str(Path(x.source).resolve())) for x in r.sources])
                    for r in m["recordings"])
                sups.extend(replace(s, id=f"{code}-{s.id}",
                                    recording_id=f"{code}-{s.recording_id}",
                                    language=normalize_language(code))
                            for s in m["supervisions"])
    return manifests


# --------------------------------------------------------------------------------------------
# Festvox-layout corpora: CMU INDIC, CMU ARCTIC (etc/txt.done.data + wav/)


def _festvox_dirs(src: Path, prefix: str) -> list[Path]:
    return sorted(p for p in src.iterdir() if p.is_dir() and p.name.startswith(prefix))


def _check_festvox(src: Path, prefix: str, corpus: str) -> None:
    dirs = _festvox_dirs(src, prefix)
    if not dirs:
        raise _missing(f"every {corpus} voice directory ({prefix}*/)", src,
                       f"give the directory the {corpus} archives unpack into")
    for d in dirs:
        data = d / "etc" / "txt.done.data"
        if not data.is_file():
            raise _missing(f"{data.relative_to(src)} (the transcripts)", src,
                           f"a {corpus} voice holds etc/txt.done.data and wav/")
        for n, line in enumerate(data.read_text(encoding="utf-8").splitlines(), 1):
            line = line.strip()
            if not line:
                continue
            if not (line.startswith("(") and line.endswith(")")) or len(line[2:-2].split()) < 2:
                raise DataError(f"{data}:{n}: not a festvox prompt line ( ID \"text\" )")
            utt = line[2:-2].split()[0]
            wav = d / "wav" / f"{utt}.wav"
            if not wav.is_file():
                raise _missing(f"{wav.relative_to(src)} (the audio of {data.name}:{n})", src,
                               "every prompt needs its WAV file")


INDIC_LANGUAGES = {"Hindi": "hi", "Tamil": "ta", "Gujarati": "gu", "English": "en"}


def _check_cmu_indic(src: Path, languages: Sequence[str]) -> None:
    _check_festvox(src, "cmu_indic_", "CMU INDIC")


def _read_cmu_indic(src: Path, languages: Sequence[str]) -> Manifests:
    from lhotse.recipes import prepare_cmu_indic

    out = _quiet(lambda: prepare_cmu_indic(src, output_dir=None))
    kept = []
    for s in out["supervisions"]:
        lang = INDIC_LANGUAGES.get(s.language)
        if lang in languages:  # split per voice and language: each gets test and dev
            kept.append((f"{s.speaker}/{lang}", replace(s, language=lang)))
    if not kept:
        raise DataError(f"{src}: no CMU INDIC utterance in {list(languages)} (its voices here "
                        f"are {sorted({s.speaker for s in out['supervisions']})})")
    return _by_split(out["recordings"], _made_splits(kept))


def _check_cmu_arctic(src: Path, languages: Sequence[str]) -> None:
    _check_festvox(src, "cmu_us_", "CMU ARCTIC")


def _read_cmu_arctic(src: Path, languages: Sequence[str]) -> Manifests:
    from lhotse.recipes import prepare_cmu_arctic

    out = _quiet(lambda: prepare_cmu_arctic(src, output_dir=None))
    sups = [(s.speaker, replace(s, language="en")) for s in out["supervisions"]]
    return _by_split(out["recordings"], _made_splits(sups))


# --------------------------------------------------------------------------------------------
# LJSpeech


def _check_ljspeech(src: Path, languages: Sequence[str]) -> None:
    meta = src / "metadata.csv"
    if not meta.is_file():
        raise _missing("metadata.csv (the transcripts)", src,
                       "give the LJSpeech-1.1/ directory: metadata.csv and wavs/")
    for n, line in enumerate(meta.read_text(encoding="utf-8").splitlines(), 1):
        cols = line.split("|")
        if len(cols) != 3:
            raise DataError(f"{meta}:{n}: {len(cols)} '|'-separated columns, LJSpeech has 3 "
                            "(id, text, normalised text)")
        if not cols[2].strip():
            raise DataError(f"{meta}:{n}: utterance {cols[0]!r} has no transcript")
        wav = src / "wavs" / f"{cols[0]}.wav"
        if not wav.is_file():
            raise _missing(f"wavs/{cols[0]}.wav (the audio of metadata.csv:{n})", src,
                           "every metadata line needs its WAV file")


def _read_ljspeech(src: Path, languages: Sequence[str]) -> Manifests:
    from lhotse.recipes import prepare_ljspeech

    out = _quiet(lambda: prepare_ljspeech(src, output_dir=None))
    # The third column spells numbers and abbreviations out: what was said.
    sups = [("LJ", replace(s, language="en", text=(s.custom or {}).get("normalized_text")
                           or s.text)) for s in out["supervisions"]]
    return _by_split(out["recordings"], _made_splits(sups))


CORPORA: dict[str, RealCorpus] = {
    "librispeech": RealCorpus("librispeech", "LibriSpeech (read English audiobooks)",
                              _check_librispeech, _read_librispeech, ("en",)),
    "fleurs": RealCorpus("fleurs", "FLEURS (read Wikipedia sentences, 102 languages)",
                         _check_fleurs, _read_fleurs, ("en", "hi", "ta", "gu")),
    "cmu-indic": RealCorpus("cmu-indic", "CMU INDIC (read prompts, Indian languages)",
                            _check_cmu_indic, _read_cmu_indic, ("hi", "ta", "gu", "en")),
    "ljspeech": RealCorpus("ljspeech", "LJSpeech (one reader, audiobooks)", _check_ljspeech,
                           _read_ljspeech, ("en",)),
    "cmu-arctic": RealCorpus("cmu-arctic", "CMU ARCTIC (read prompts, US English voices)",
                             _check_cmu_arctic, _read_cmu_arctic, ("en",)),
}


# corpus -> the folder names its archives unpack into
UNPACKED = {"librispeech": ("LibriSpeech",), "ljspeech": ("LJSpeech-1.1",)}


def prepare_corpus(corpus: str, src_dir: str | Path, out_dir: str | Path, *,
                   languages: Sequence[str] | None = None, on_error: str = "raise",
                   overwrite: bool = False) -> dict[str, ImportReport]:
    """Prepare ``corpus`` (a key of :data:`CORPORA`) from ``src_dir`` into ``out_dir``: one
    split per split of the corpus (module doc); returns each split's import report."""
    if corpus not in CORPORA:
        raise DataError(f"unknown corpus {corpus!r}; choose one of {sorted(CORPORA)}")
    spec = CORPORA[corpus]
    src = Path(src_dir)
    if not src.is_dir():
        raise DataError(f"{src}: no such directory (give the unpacked {spec.what} corpus)")
    # The folder the archives unpack into, given its parent: step into it.
    inner = [src / n for n in UNPACKED.get(corpus, ()) if (src / n).is_dir()]
    if len(inner) == 1:
        src = inner[0]
    langs = tuple(languages or spec.languages)
    unknown = sorted(set(langs) - set(spec.languages))
    if unknown:
        raise DataError(f"{spec.name} holds no {unknown} speech here; its languages: "
                        f"{list(spec.languages)}")
    spec.check(src, langs)
    manifests = spec.read(src.resolve(), langs)
    out = Path(out_dir).resolve()
    cfg = ImportConfig(on_error=on_error, resample=True)
    for split in manifests:  # every clash said before anything is written
        check_split_free(out, split, cfg.sample_rate, overwrite)
    reports = {}
    for split, (recs, sups) in sorted(manifests.items()):
        texts = [replace(s, text=normalize_text(s.text or "", s.language),
                         custom={**(s.custom or {}), "raw_text": s.text}) for s in sups]
        split_cfg = replace(cfg, split=split)
        with staging(out, split) as stage:
            reports[split] = finish_import(recs, texts, out, split_cfg,
                                           ImportReport(split, out),
                                           f"{spec.name}:{src.resolve()}", stage)
    from speechlab.data.corpus import read_corpus_json

    info = read_corpus_json(out)
    info.setdefault("prepared", {})[spec.name] = {
        "source": str(src.resolve()), "splits": sorted(manifests),
        "languages": sorted({s.language for _, sups in manifests.values() for s in sups}),
        "text_normalisation": NORMALISATION, "resampled_to": cfg.sample_rate}
    atomic_write_json(out / "corpus.json", info)
    return reports
