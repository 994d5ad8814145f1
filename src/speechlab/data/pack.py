"""Carry a corpus to a machine that cannot build it, in one file: its manifests, and the audio of
the splits asked for coded as Opus, so that hours of speech fit where a job runner limits what
travels (a GPU machine without espeak-ng or festival, say). The other splits come cut to their
first few recordings, so that the corpus still reads end to end.

    speechlab data pack CORPUS --out corpus.tar [--splits train,dev] [--kbps 24] [--others 8]
    speechlab data unpack corpus.tar --out CORPUS

:func:`pack_corpus` writes an uncompressed tar: ``pack.json`` (what it holds), the corpus's
``corpus.json`` and every manifest as they are, and ``audio/<path>.ogg`` for each recording of
the packed splits (its path relative to the corpus directory). :func:`unpack_corpus` decodes the
audio back into 16-bit WAV at the same relative paths under the new directory and rewrites every
manifest's audio paths to point there.

Opus is lossy: the unpacked corpus is not the one built. ``pack.json`` and the unpacked
``corpus.json`` (``packed``) say which splits went through Opus and at what rate. Each decoded
recording is cut or zero-padded to its manifest's sample count (the codec's frames round it).
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from speechlab.errors import DataError
from speechlab.files import atomic_path, atomic_write_json, removed_on_failure

PACK_FORMAT = "speechlab-corpus-pack/1"
PACK_INFO = "pack.json"
AUDIO = "audio"
#: The Opus rates a pack may ask for, kbps: below 12 wideband speech loses its consonants;
#: above 128 a pack is no smaller than FLAC.
KBPS_RANGE = (12, 128)


def _opus_level(kbps: float) -> float:
    """libsndfile's Opus ``compression_level`` for about ``kbps`` (it maps 0..1 to about
    256..6 kbps, linearly; pack.json records the rate each pack reached)."""
    return float(np.clip((256.0 - kbps) / 250.0, 0.0, 1.0))


def _manifests(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.glob("*.jsonl.gz")
                  if p.name.split("_")[-1] in ("cuts.jsonl.gz", "recordings.jsonl.gz",
                                               "supervisions.jsonl.gz"))


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _sources(obj: Any) -> Iterator[dict[str, Any]]:
    """Every audio source (``{"type": "file", "source": path}``) inside a manifest item."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "sources" and isinstance(value, list):
                yield from (s for s in value if isinstance(s, dict) and s.get("type") == "file")
            else:
                yield from _sources(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _sources(value)


def _relative(source: str, corpus: Path) -> str:
    path = Path(source)
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.resolve().relative_to(corpus.resolve()).as_posix()
    except ValueError:
        raise DataError(f"{source}: a recording outside the corpus directory {corpus} cannot "
                        "be packed") from None


def _split_of(path: Path) -> str:
    return path.name.rsplit("_", 1)[0]


def _recording_id(item: dict[str, Any]) -> str | None:
    """The recording a manifest line belongs to (a recording, a supervision or a cut)."""
    if "sources" in item:
        return item.get("id")
    if "recording_id" in item:
        return item["recording_id"]
    recording = item.get("recording")
    return recording.get("id") if isinstance(recording, dict) else None


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    entry = tarfile.TarInfo(name)
    entry.size = len(data)
    tar.addfile(entry, io.BytesIO(data))


def pack_corpus(corpus: Path, out: Path, splits: Iterable[str] = ("train", "dev"),
                kbps: float = 24.0, others: int = 8, progress: bool = True) -> dict[str, Any]:
    """Write ``corpus`` (a corpus directory) into the tar ``out``: ``splits`` whole, every other
    split cut to its first ``others`` recordings (so the corpus still reads end to end: a
    reproduction's data preparation wants each split's audio), the audio as Opus at about
    ``kbps``. Returns what ``pack.json`` says."""
    import gzip

    import soundfile as sf

    from speechlab.data.corpus import read_corpus_json
    from speechlab.progress import WorkProgress

    corpus = Path(corpus)
    read_corpus_json(corpus)  # a directory that is no corpus is refused before anything is written
    splits = list(splits)
    if not KBPS_RANGE[0] <= kbps <= KBPS_RANGE[1]:
        raise DataError(f"--kbps {kbps:g}: give {KBPS_RANGE[0]} to {KBPS_RANGE[1]}")
    missing = [s for s in splits if not (corpus / f"{s}_recordings.jsonl.gz").is_file()]
    if missing:
        raise DataError(f"{corpus}: no {missing[0]}_recordings.jsonl.gz to pack the audio of")
    manifests = _manifests(corpus)
    keep: dict[str, list[dict[str, Any]]] = {}  # split -> its recordings that are packed
    for path in manifests:
        if path.name.endswith("_recordings.jsonl.gz"):
            items = list(_lines(path))
            split = _split_of(path)
            keep[split] = items if split in splits else items[:max(others, 0)]
    total = sum(len(r) for r in keep.values())
    level = _opus_level(kbps)
    summary: dict[str, Any] = {"format": PACK_FORMAT, "codec": "opus", "kbps_asked": kbps,
                               "root": str(corpus.resolve()), "whole": splits, "splits": {},
                               "created": time.strftime("%Y-%m-%d %H:%M:%S")}
    with atomic_path(out) as tmp, tarfile.open(tmp, "w") as tar:
        tar.add(corpus / "corpus.json", arcname="corpus.json")
        for path in manifests:
            split = _split_of(path)
            if split in splits or split not in keep:
                tar.add(path, arcname=path.name)
                continue
            ids = {r["id"] for r in keep[split]}
            lines = [json.dumps(i, ensure_ascii=False) + "\n" for i in _lines(path)
                     if _recording_id(i) in ids]
            _add_bytes(tar, path.name, gzip.compress("".join(lines).encode("utf-8"), mtime=0))
        with WorkProgress("packing audio", total, unit="recordings", enabled=progress) as bar:
            done = 0
            for split, items in keep.items():
                seconds = size = 0.0
                for rec in items:
                    for source in _sources(rec):
                        rel = _relative(source["source"], corpus)
                        src = corpus / rel
                        try:
                            audio, rate = sf.read(src, dtype="float32")
                        except (OSError, RuntimeError) as e:
                            raise DataError(f"{src}: cannot read it ({e})") from None
                        buf = io.BytesIO()
                        sf.write(buf, audio, rate, format="OGG", subtype="OPUS",
                                 compression_level=level)
                        _add_bytes(tar, f"{AUDIO}/{rel}.ogg", buf.getvalue())
                        seconds += len(audio) / rate
                        size += buf.tell()
                    done += 1
                    bar.update(done)
                summary["splits"][split] = {
                    "recordings": len(items), "whole": split in splits,
                    "hours": round(seconds / 3600, 4), "mb": round(size / 1e6, 2),
                    "kbps": round(8 * size / max(seconds, 1e-9) / 1000, 1)}
        _add_bytes(tar, PACK_INFO, json.dumps(summary, indent=2).encode())
    return summary


def _safe_member(name: str) -> bool:
    path = Path(name)
    return not path.is_absolute() and ".." not in path.parts


def unpack_corpus(pack: Path, out: Path, progress: bool = True, jobs: int = 1
                  ) -> dict[str, Any]:
    """Make the corpus directory ``out`` from the tar ``pack`` (:func:`pack_corpus`): audio
    decoded to WAV by ``jobs`` threads, every manifest's audio paths pointing under ``out``.
    Returns pack.json."""
    import gzip

    import soundfile as sf

    from speechlab.progress import WorkProgress

    pack, out = Path(pack), Path(out)
    try:
        tar = tarfile.open(pack, "r")  # noqa: SIM115 (closed by the with below)
    except (OSError, tarfile.TarError) as e:
        raise DataError(f"{pack}: not a corpus pack ({e})") from None
    with tar, removed_on_failure(out):
        members = {m.name: m for m in tar.getmembers()}
        bad = [n for n in members if not _safe_member(n)]
        if bad or PACK_INFO not in members or "corpus.json" not in members:
            raise DataError(f"{pack}: not a corpus pack (no {PACK_INFO} and corpus.json"
                            + (f", or a member outside it: {bad[0]}" if bad else "") + ")")

        def read(name: str) -> bytes:
            return tar.extractfile(members[name]).read()  # type: ignore[union-attr]

        summary = json.loads(read(PACK_INFO))
        if summary.get("format") != PACK_FORMAT:
            raise DataError(f"{pack}: format {summary.get('format')!r}, expected {PACK_FORMAT}")
        packed_root = summary.get("root", "")
        manifests = {}
        for name in members:
            if name.endswith(".jsonl.gz") and "/" not in name:
                text = gzip.decompress(read(name)).decode("utf-8")
                manifests[name] = [json.loads(line) for line in text.splitlines() if line.strip()]
        # each recording's sample count, to cut or pad its decoded audio to (Opus frames round it)
        samples = {}
        for items in manifests.values():
            for item in items:
                if "num_samples" in item:
                    for source in _sources(item):
                        samples[_relative_to(source["source"], packed_root)] = int(
                            item["num_samples"])
        out.mkdir(parents=True, exist_ok=True)
        root = out.resolve()
        audio = [m for n, m in members.items() if n.startswith(AUDIO + "/") and m.isfile()]

        def decode(rel: str, coded: bytes) -> None:
            data, rate = sf.read(io.BytesIO(coded), dtype="int16")
            want = samples.get(rel, len(data))
            data = data[:want] if len(data) >= want else np.pad(data, (0, want - len(data)))
            with atomic_path(root / rel, suffix=".wav", durable=False) as tmp:
                sf.write(tmp, data, rate, subtype="PCM_16", format="WAV")

        # libsndfile runs without the GIL: threads decode side by side while this one reads
        with WorkProgress("unpacking audio", len(audio), unit="recordings",
                          enabled=progress) as bar, \
                ThreadPoolExecutor(max(1, jobs)) as pool:
            pending = []
            for member in audio:
                rel = member.name[len(AUDIO) + 1:-len(".ogg")]
                pending.append(pool.submit(decode, rel, read(member.name)))
            for i, job in enumerate(pending):
                job.result()
                bar.update(i + 1)
        for name, items in manifests.items():
            for item in items:
                for source in _sources(item):
                    source["source"] = str(root / _relative_to(source["source"], packed_root))
            with atomic_path(out / name, suffix=".jsonl.gz") as tmp, \
                    gzip.open(tmp, "wt", encoding="utf-8") as f:
                f.writelines(json.dumps(i, ensure_ascii=False) + "\n" for i in items)
        info = json.loads(read("corpus.json"))
        info["packed"] = {"codec": "opus", "splits": summary.get("splits", {}),
                          "note": "the audio went through Opus and back; the splits not "
                                  "'whole' hold only their first recordings, though the "
                                  "counts above this say otherwise"}
        atomic_write_json(out / "corpus.json", info)
    return summary


def _relative_to(source: str, root: str) -> str:
    """A packed manifest's audio path relative to the corpus directory it was packed from."""
    path = Path(source)
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.relative_to(root).as_posix() if root else path.name
    except ValueError:
        raise DataError(f"{source}: outside the packed corpus directory {root}") from None
