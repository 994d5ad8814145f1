"""Finished decodings kept on disk, so that a killed run resumes without decoding again.

A decode job's result (whatever the paper's ``decode`` returns: dataclasses of dicts, lists,
numbers, strings, numpy arrays, tensors) is written to ``RUN/decoded/<job>.pt`` once the job
finishes, with a key naming what it was computed from: the job itself (its name, options and
model), the run's saved recipe (``config.yaml``) and the trained model's checkpoint files
(name, size, modification time). A later run reuses the file only when the key is the same;
retraining the model, changing the recipe or the job decodes again. Delete ``RUN/decoded`` to
decode everything again (e.g. after changing decoding code).

Reading never runs code from the file: it is loaded with ``torch.load(weights_only=True)``,
allowing only dataclasses defined in speechlab and numpy's array and scalar reconstruction. A
file that is unreadable, holds anything else or has another key is ignored (and decoded
again), with a warning naming it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from speechlab.files import atomic_path

log = logging.getLogger(__name__)

DIR_NAME = "decoded"

#: numpy's pickled arrays, dtypes and scalars: reconstruction helpers, no user code.
_NUMPY = {
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar",
    "numpy.ndarray", "numpy.dtype",
}


def decoding_key(job: Any, config_file: Path, model_dir: Path) -> str:
    """A digest of what a decoding depends on: ``repr(job)`` (frozen dataclasses: its name,
    options and model job), the run's recipe file and the model's ``*.pt`` files' names, sizes
    and modification times."""
    h = hashlib.sha256(repr(job).encode())
    h.update(config_file.read_bytes() if config_file.is_file() else b"")
    for f in sorted(model_dir.glob("*.pt")):
        st = f.stat()
        h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def _allowed(name: str) -> Any | None:
    """The global ``module.qualname`` if a kept decoding may name it, else None."""
    if name in _NUMPY or name.startswith("numpy.dtypes."):
        module, _, attr = name.rpartition(".")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            return None
    module, _, qual = name.rpartition(".")
    if module.split(".")[0] != "speechlab":
        return None
    try:
        obj: Any = importlib.import_module(module)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return obj if isinstance(obj, type) and dataclasses.is_dataclass(obj) else None


def _numpy_dtypes() -> list[type]:
    """numpy's dtype classes (``numpy.dtypes.Float32DType``, ...), which a pickled array's
    dtype is rebuilt with but the checkpoint's list of globals does not name."""
    import numpy as np

    return [t for name in dir(np.dtypes) if name.endswith("DType")
            and isinstance(t := getattr(np.dtypes, name), type)]


def load_decoded(path: Path, key: str) -> tuple[bool, Any]:
    """``(True, value)`` if ``path`` holds a decoding with ``key``, else ``(False, None)``."""
    if not path.is_file():
        return False, None
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
        allowed = {n: _allowed(n) for n in names}
        refused = sorted(n for n, obj in allowed.items() if obj is None)
        if refused:
            log.warning("%s names %s, which a kept decoding may not hold: decoding again",
                        path, ", ".join(refused))
            return False, None
        with torch.serialization.safe_globals([*allowed.values(), *_numpy_dtypes()]):
            stored = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable file is decoded again
        first = str(e).strip().split("\n")[-1][:200]
        log.warning("%s is not a readable decoding (%s: %s): decoding again", path,
                    type(e).__name__, first)
        return False, None
    if not isinstance(stored, dict) or stored.get("key") != key:
        log.info("%s was decoded from another model, recipe or job: decoding again", path)
        return False, None
    return True, stored["value"]


def save_decoded(path: Path, key: str, value: Any) -> None:
    """Write ``value`` with its ``key`` to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        torch.save({"key": key, "value": value}, tmp)


def kept_or_decoded(run_out: Path, job: Any, config_file: Path, model_dir: Path,
                    decode: Callable[[], Any]) -> Any:
    """The decoding of ``job`` kept in ``run_out/decoded`` for the same key, or ``decode()``'s
    result, kept there for the next run."""
    path = run_out / DIR_NAME / f"{job.name}.pt"
    key = decoding_key(job, config_file, model_dir)
    found, value = load_decoded(path, key)
    if found:
        log.info("decoding %s kept from an earlier run (%s)", job.name, path)
        return value
    value = decode()
    try:
        save_decoded(path, key, value)
    except Exception as e:  # noqa: BLE001 - a result that cannot be kept is still returned
        log.warning("could not keep the decoding of %s in %s (%s); a resumed run decodes it "
                    "again", job.name, path, e)
    return value


__all__ = ["DIR_NAME", "decoding_key", "kept_or_decoded", "load_decoded", "save_decoded"]
