"""The one checkpoint format of speechlab, and loading model weights from it.

A checkpoint is a ``dict`` of tensors and plain Python values (int, float, str, bool, None,
lists, tuples, dicts) written with ``torch.save`` to a temporary name and renamed into place,
so a crash at any moment leaves either the old file or the new one, never half of one. It is
read back only with ``torch.load(weights_only=True)``: loading a checkpoint never runs code.

Keys written by the trainer (``FORMAT_VERSION`` 1)::

    format_version  int
    step            int, optimiser updates done
    model           model.state_dict()
    optimizer       optimizer.state_dict()
    scheduler       LambdaLR.state_dict()
    batches         list, one sampler state_dict() per rank
    rng             list, one rng_state() per rank (python random, numpy, torch [, cuda])
    window          list, per rank: the sums behind the next train log line
    trainer         dict: best_metric, best_step, bad_validations, nonfinite_batches,
                    consecutive_nonfinite, stopped, elapsed
    task            the task's own state_dict() when it has one (e.g. carried TTS state)
    config          the TrainConfig as a plain dict
    world_size      int, number of ranks that wrote it
    model_config    optional: {"family": str, "config": dict}, what rebuilds the model
                    (speechlab.train.card.ModelCard)

Fine-tuning takes a subset of the weights (:func:`load_model_weights` with prefix filters and a
key-mapping callback), and :func:`export_safetensors` writes weights alone for release.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from speechlab.errors import SpeechlabError
from speechlab.files import atomic_path, canonical_safetensors
from speechlab.nn.weights import check_weight

FORMAT_VERSION = 1
CHECKPOINT_NAME = "ckpt-{step:08d}.pt"
BEST_NAME = "best.pt"
_CHECKPOINT_RE = re.compile(r"^ckpt-(\d+)\.pt$")

_PLAIN_SCALARS = (bool, int, float, str, bytes, type(None))


def _check_plain(obj: Any, key: str) -> None:
    """Refuse, at save time, anything ``torch.load(weights_only=True)`` would refuse at load time."""
    if isinstance(obj, (torch.Tensor, torch.Size, torch.dtype, torch.device) + _PLAIN_SCALARS):
        return
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if not isinstance(k, _PLAIN_SCALARS):
                raise TypeError(f"checkpoint entry {key}: key {k!r} is not a plain value")
            _check_plain(v, f"{key}.{k}")
        return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _check_plain(v, f"{key}[{i}]")
        return
    raise TypeError(f"checkpoint entry {key} is a {type(obj).__name__}; store tensors and plain "
                    "Python values only so that torch.load(weights_only=True) can read it")


def save_checkpoint(path: str | Path, **parts: Any) -> Path:
    """Write ``parts`` (plus ``format_version``) atomically to ``path``; return ``path``."""
    path = Path(path)
    ckpt = {"format_version": FORMAT_VERSION, **parts}
    _check_plain(ckpt, "checkpoint")
    with atomic_path(path) as tmp:
        torch.save(ckpt, tmp)
    return path


def load_checkpoint(path: str | Path, *, mmap: bool = False) -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True`` onto the CPU.

    ``mmap``: map the file instead of reading it, so that a tensor is read from disk only when
    it is used (a caller that wants the card or the step, not the weights).

    Raises :class:`SpeechlabError` naming the file when it is missing, corrupt, truncated, not a
    speechlab checkpoint, or from a newer format.
    """
    path = Path(path)
    if not path.is_file():
        raise SpeechlabError(f"checkpoint {path} does not exist")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as e:  # zipfile, pickle, EOF and RuntimeError all mean "unreadable" here
        raise SpeechlabError(
            f"checkpoint {path} is corrupt or truncated and cannot be read ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}); delete it to resume from an older "
            "checkpoint, or restore it from a backup") from None
    if not isinstance(ckpt, dict) or "format_version" not in ckpt:
        raise SpeechlabError(f"{path} is not a speechlab checkpoint (no format_version)")
    if ckpt["format_version"] > FORMAT_VERSION:
        raise SpeechlabError(
            f"checkpoint {path} has format version {ckpt['format_version']}, newer than this "
            f"speechlab reads ({FORMAT_VERSION}); upgrade speechlab")
    return ckpt


def checkpoint_summary(path: str | Path) -> dict[str, Any]:
    """What a checkpoint says of its weights, read without reading its tensors: ``step`` (the
    update it was written at) and, when its ``model`` is the weights' moving average,
    ``ema_decay`` and ``average_updates``. Keys it does not say are left out."""
    ckpt = load_checkpoint(path, mmap=True)
    out: dict[str, Any] = {}
    if isinstance(ckpt.get("step"), int):
        out["step"] = ckpt["step"]
    if "training_model" in ckpt:
        config = ckpt.get("config") if isinstance(ckpt.get("config"), dict) else {}
        out["ema_decay"] = config.get("ema_decay")
        out["average_updates"] = ckpt.get("average_updates")
    return out


def training_ended(out_dir: str | Path) -> dict[str, Any] | None:
    """How the training in ``out_dir`` ended, read from its newest periodic checkpoint without
    reading its tensors: ``{"step": N, "reason": "early stopping" | "max_steps" | "time
    limit"}`` (the rules that end a run for good: rerunning it trains no more), or None while
    it has not (no checkpoint, or one written before any of them ended it)."""
    latest = latest_checkpoint(out_dir)
    if latest is None:
        return None
    ckpt = load_checkpoint(latest, mmap=True)
    step = ckpt.get("step")
    trainer = ckpt.get("trainer") if isinstance(ckpt.get("trainer"), dict) else {}
    config = ckpt.get("config") if isinstance(ckpt.get("config"), dict) else {}
    if not isinstance(step, int):
        return None
    if trainer.get("stopped"):
        return {"step": step, "reason": "early stopping"}
    if isinstance(config.get("max_steps"), int) and step >= config["max_steps"]:
        return {"step": step, "reason": "max_steps"}
    minutes, elapsed = config.get("max_minutes"), trainer.get("elapsed")
    if minutes and isinstance(elapsed, (int, float)) and elapsed >= 60 * minutes:
        return {"step": step, "reason": "time limit"}
    return None


def checkpoint_path(out_dir: str | Path, step: int) -> Path:
    return Path(out_dir) / CHECKPOINT_NAME.format(step=step)


def list_checkpoints(out_dir: str | Path) -> list[tuple[int, Path]]:
    """Periodic checkpoints in ``out_dir`` as ``(step, path)``, oldest first."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    found = []
    for p in out_dir.iterdir():
        m = _CHECKPOINT_RE.match(p.name)
        if m and p.is_file():
            found.append((int(m.group(1)), p))
    return sorted(found)


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The periodic checkpoint with the highest step in ``out_dir``, or None."""
    found = list_checkpoints(out_dir)
    return found[-1][1] if found else None


def remove_stale_temporaries(out_dir: str | Path) -> None:
    """Delete temporary files a killed process left behind (``atomic_path`` names them
    ``.NAME.XXXX.tmp``); they are never read, only wasted space."""
    out_dir = Path(out_dir)
    if out_dir.is_dir():
        for p in out_dir.glob(".*.tmp"):
            p.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# RNG states: converted to tensors and plain values so weights_only=True accepts them.


def rng_state() -> dict[str, Any]:
    """The global RNG states (python ``random``, numpy legacy, torch CPU and CUDA)."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    state = {
        "python": [version, list(internal), gauss],
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss),
                  float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), int(pos), int(has_gauss),
                         float(cached)))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ---------------------------------------------------------------------------------------------
# Model weights for fine-tuning and release.


@dataclass
class LoadedWeights:
    """What :func:`load_model_weights` did: model keys loaded, model keys left as they were,
    checkpoint keys (after mapping) the model does not have."""

    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)


def _state_dict_from(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(path))
        except (SafetensorError, OSError) as e:
            raise SpeechlabError(f"weights file {path} cannot be read ({e})") from None
    ckpt = load_checkpoint(path)
    if "model" not in ckpt:
        raise SpeechlabError(f"checkpoint {path} holds no model weights (no 'model' entry)")
    return ckpt["model"]


def load_model_weights(model: nn.Module, path: str | Path, *, strict: bool = True,
                       include: Sequence[str] = (), exclude: Sequence[str] = (),
                       map_key: Callable[[str], str | None] | None = None) -> LoadedWeights:
    """Copy weights from a checkpoint (or ``.safetensors`` file) into ``model``.

    Checkpoint keys are filtered first (kept if they start with any ``include`` prefix, when
    given, and with no ``exclude`` prefix), then renamed by ``map_key`` (return None to drop a
    key). This is how a monolingual model is fine-tuned from a multilingual multi-softmax
    RNN-T, keeping the shared parameters and one language's head and discarding the rest
    (Sec. 2.3 of the paper)::

        def hindi_only(key: str) -> str | None:
            if key.startswith("joiner.heads."):  # language-specific: keep Hindi's, renamed
                return key.replace("joiner.heads.hi.", "joiner.head.", 1) \
                    if key.startswith("joiner.heads.hi.") else None
            return key  # shared parameters as they are

        load_model_weights(mono_model, "multi/best.pt", map_key=hindi_only)

    ``strict``: every model key must be loaded and every kept checkpoint key used, else
    :class:`SpeechlabError` lists them. A shape mismatch is always an error.
    """
    path = Path(path)
    source = _state_dict_from(path)
    mapped: dict[str, torch.Tensor] = {}
    for key, value in source.items():
        if include and not any(key.startswith(p) for p in include):
            continue
        if any(key.startswith(p) for p in exclude):
            continue
        new_key = map_key(key) if map_key is not None else key
        if new_key is not None:
            mapped[new_key] = value
    target = model.state_dict()
    report = LoadedWeights(
        loaded=sorted(k for k in mapped if k in target),
        missing=sorted(k for k in target if k not in mapped),
        unexpected=sorted(k for k in mapped if k not in target),
    )
    for k in report.loaded:
        if tuple(mapped[k].shape) != tuple(target[k].shape):
            raise SpeechlabError(
                f"{path}: weight {k!r} has shape {tuple(mapped[k].shape)} but the model expects "
                f"{tuple(target[k].shape)}; the model config does not match the checkpoint")
        check_weight(k, mapped[k], target[k], path)
    if strict and (report.missing or report.unexpected):
        raise SpeechlabError(
            f"{path} does not match the model: missing {_few(report.missing)}, unexpected "
            f"{_few(report.unexpected)}; pass strict=False or filter/map the keys")
    model.load_state_dict({k: mapped[k] for k in report.loaded}, strict=False)
    return report


def _few(keys: list[str], n: int = 5) -> str:
    shown = ", ".join(keys[:n])
    return f"[{shown}{', ...' if len(keys) > n else ''}] ({len(keys)})"


def export_safetensors(source: nn.Module | Mapping[str, torch.Tensor] | str | Path,
                       path: str | Path, metadata: Mapping[str, str] | None = None) -> Path:
    """Write model weights alone to a ``.safetensors`` file, atomically.

    ``source`` is a model, a state dict, or a checkpoint path (its ``model`` entry).
    """
    from safetensors.torch import save_file

    if isinstance(source, nn.Module):
        state = source.state_dict()
    elif isinstance(source, (str, Path)):
        state = _state_dict_from(Path(source))
    else:
        state = dict(source)
    # safetensors refuses tensors that share storage (tied weights) or are views: copy each.
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in state.items()
               if isinstance(v, torch.Tensor)}
    path = Path(path)
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=dict(metadata) if metadata else None)
        canonical_safetensors(tmp)
    return path
