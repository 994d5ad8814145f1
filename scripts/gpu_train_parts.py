"""Carry a training run's checkpoints through a job runner that brings back only small files.

    python scripts/gpu_train_parts.py collect RUN/models/MODEL DEST
    python scripts/gpu_train_parts.py restore DEST RUN/models/MODEL [--overwrite]

``collect`` (on the GPU machine, scripts/gpu-train.sh) splits the newest periodic checkpoint and
``best.pt`` into parts of at most 15 MiB. ``best.pt`` loses its optimizer and scheduler state on
the way, since nothing reads them back (a run resumes from the periodic checkpoint; best.pt is
read for its weights). It copies ``log.jsonl`` and writes ``collected.json``: each file's update
and the SHA-256 of each whole file.

``restore`` (where the run lives) joins the parts, checks every SHA-256, and writes
``ckpt-<step>.pt`` and ``best.pt`` into the model's run directory. ``best.pt`` gets the periodic
checkpoint's optimizer state back, so it has the checkpoint format's every field. The collected
``log.jsonl`` replaces the run's, which is kept as ``log-before-restore.jsonl``. A run directory
whose newest checkpoint is not older than the collected one is refused without ``--overwrite``. The same ``speechlab reproduce`` or ``speechlab train`` command then
resumes from the restored checkpoint.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import shutil
import sys
from pathlib import Path

import torch

PART_BYTES = 15 * 1024 * 1024
INFO = "collected.json"
CKPT = re.compile(r"ckpt-(\d+)\.pt$")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _newest(run: Path) -> Path | None:
    found = sorted((int(m.group(1)), p) for p in run.glob("ckpt-*.pt")
                   if (m := CKPT.search(p.name)))
    return found[-1][1] if found else None


def _split(name: str, data: bytes, dest: Path) -> list[str]:
    parts = []
    for i in range(0, max(len(data), 1), PART_BYTES):
        part = f"{name}.part{i // PART_BYTES}"
        (dest / part).write_bytes(data[i:i + PART_BYTES])
        parts.append(part)
    return parts


def collect(run: Path, dest: Path) -> dict:
    dest.mkdir(parents=True, exist_ok=True)
    newest = _newest(run)
    if newest is None:
        raise SystemExit(f"{run}: no periodic checkpoint (ckpt-*.pt) to collect")
    info: dict = {"files": {}}
    data = newest.read_bytes()
    state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    info["files"]["latest"] = {"name": newest.name, "step": int(state["step"]),
                               "sha256": _sha(data), "parts": _split("latest.pt", data, dest)}
    best = run / "best.pt"
    if best.is_file():
        state = torch.load(best, map_location="cpu", weights_only=True)
        # nothing reads these back from best.pt (a run resumes from its newest checkpoint)
        dropped = [key for key in ("optimizer", "scheduler", "training_model") if key in state]
        for key in dropped:
            state.pop(key)
        buf = io.BytesIO()
        torch.save(state, buf)
        data = buf.getvalue()
        info["files"]["best"] = {"name": "best.pt", "step": int(state["step"]),
                                 "sha256": _sha(data), "parts": _split("best.pt", data, dest),
                                 "without": dropped}
    if (run / "log.jsonl").is_file():
        shutil.copyfile(run / "log.jsonl", dest / "log.jsonl")
    (dest / INFO).write_text(json.dumps(info, indent=1) + "\n")
    return info


def _join(src: Path, entry: dict) -> bytes:
    data = b"".join((src / part).read_bytes() for part in entry["parts"])
    if _sha(data) != entry["sha256"]:
        raise SystemExit(f"{src}: {entry['name']} does not match its SHA-256 (a part is "
                         "missing or damaged)")
    return data


def restore(src: Path, run: Path, overwrite: bool = False) -> list[Path]:
    info_path = src / INFO
    if not info_path.is_file():
        raise SystemExit(f"{src}: no {INFO} (not a collect's output)")
    info = json.loads(info_path.read_text())
    latest = info["files"]["latest"]
    run.mkdir(parents=True, exist_ok=True)
    newest = _newest(run)
    if newest is not None and not overwrite:
        step = int(CKPT.search(newest.name).group(1))  # type: ignore[union-attr]
        if step >= latest["step"]:
            raise SystemExit(f"{run}: its newest checkpoint ({newest.name}) is not older than "
                             f"the collected one (update {latest['step']}); pass --overwrite "
                             "to use the collected one anyway")
    latest_data = _join(src, latest)
    written = []
    target = run / f"ckpt-{latest['step']:08d}.pt"
    if target.exists() and not overwrite:
        raise SystemExit(f"{target} exists; pass --overwrite to replace it")
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(latest_data)
    tmp.replace(target)
    written.append(target)
    if "best" in info["files"]:
        best = torch.load(io.BytesIO(_join(src, info["files"]["best"])), map_location="cpu",
                          weights_only=True)
        full = torch.load(io.BytesIO(latest_data), map_location="cpu", weights_only=True)
        for key in info["files"]["best"].get("without", []):
            best[key] = full[key]
        target = run / "best.pt"
        if target.exists() and not overwrite and newest is not None:
            raise SystemExit(f"{target} exists; pass --overwrite to replace it")
        tmp = target.with_name(f".{target.name}.tmp")
        torch.save(best, tmp)
        tmp.replace(target)
        written.append(target)
    if (src / "log.jsonl").is_file():  # the run goes on from the collected updates
        if (run / "log.jsonl").exists():
            (run / "log.jsonl").replace(run / "log-before-restore.jsonl")
        shutil.copyfile(src / "log.jsonl", run / "log.jsonl")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("collect")
    c.add_argument("run", type=Path)
    c.add_argument("dest", type=Path)
    r = sub.add_parser("restore")
    r.add_argument("src", type=Path)
    r.add_argument("run", type=Path)
    r.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    if args.what == "collect":
        info = collect(args.run, args.dest)
        print(json.dumps({k: {"step": v["step"], "parts": len(v["parts"])}
                          for k, v in info["files"].items()}))
    else:
        for path in restore(args.src, args.run, args.overwrite):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
