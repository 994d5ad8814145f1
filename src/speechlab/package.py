"""A trained model as a self-contained directory, usable with nothing else from the run that
made it (``speechlab export``, read back by ``speechlab.load``).

Layout (in the manner of Hugging Face's ``save_pretrained``)::

    PKG/
      speechlab.json      the card: format and version, family, kind (asr / tts / ssl), the
                          backend its networks are for (torch / onnx), the model config,
                          languages, tokenizers or vocabulary, feature and CMVN settings,
                          decoding defaults, the side files below, the run's test figures and
                          the command that made them
      model.safetensors   the weights (never a pickle); not in an ONNX package, whose graphs
                          hold them
      ...                 side files the model needs, named in the card's "files"
                          (a decoding graph, an ARPA LM, a TTS question set, ONNX graphs)

This module knows no model family: it writes and reads the card, the weights and the side
files; each family's library says what goes into its card (``to_package`` / ``from_package``).
A package is written into a temporary directory next to ``PKG`` and renamed into place, so a
killed export leaves nothing half-written, and an existing ``PKG`` is replaced only with
``overwrite``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from speechlab.errors import DataError
from speechlab.files import (
    atomic_write_text,
    canonical_safetensors,
    current_umask,
    make_temp_dir,
)
from speechlab.train.card import ModelCard

CARD_NAME = "speechlab.json"
WEIGHTS_NAME = "model.safetensors"
FORMAT = "speechlab-package"
VERSION = 1
KINDS = ("asr", "tts", "ssl")
#: What runs a package's networks: PyTorch (weights in model.safetensors) or onnxruntime
#: (ONNX graphs among the side files, ``speechlab export --format onnx``).
BACKENDS = ("torch", "onnx")


@dataclass(frozen=True)
class PackageCard(ModelCard):
    """The card of a package: a :class:`~speechlab.train.card.ModelCard` (the ``family`` and
    the ``config`` that rebuild the network, as every checkpoint carries them; ``build``) and
    what a package holds besides. ``kind`` is ``asr``, ``tts`` or ``ssl``; ``files`` maps a
    role (``"graph"``, ``"lm"``, ...) to a file name inside the package; ``data`` holds what
    the family needs besides (tokenizers, CMVN statistics, decoding defaults); ``results`` the
    run's test figures and ``made_by`` the command, run and checkpoint they came from;
    ``backend`` what runs the networks (:data:`BACKENDS`)."""

    kind: str
    languages: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    made_by: dict[str, Any] = field(default_factory=dict)
    backend: str = "torch"

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "family": self.family, "kind": self.kind,
                "backend": self.backend, "languages": list(self.languages),
                "config": self.config, "files": self.files,
                "data": self.data, "results": self.results, "made_by": self.made_by}

    @classmethod
    def from_json(cls, d: Any, source: object) -> PackageCard:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise DataError(f"{source}: not a speechlab package card (no \"format\": "
                            f"\"{FORMAT}\")")
        if d.get("version") != VERSION:
            raise DataError(f"{source}: package version {d.get('version')!r}; this speechlab "
                            f"reads version {VERSION}: export the model again")
        for key, kind in (("family", str), ("kind", str), ("config", dict), ("files", dict),
                          ("data", dict), ("languages", list)):
            if not isinstance(d.get(key), kind):
                raise DataError(f"{source}: \"{key}\" must be a {kind.__name__}")
        if d["kind"] not in KINDS:
            raise DataError(f"{source}: kind {d['kind']!r} is not one of {list(KINDS)}")
        backend = d.get("backend", "torch")  # packages from before ONNX export have none
        if backend not in BACKENDS:
            raise DataError(f"{source}: backend {backend!r} is not one of {list(BACKENDS)}")
        for role, name in d["files"].items():
            if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
                raise DataError(f"{source}: file {role!r} must be a plain file name inside the "
                                f"package, got {name!r}")
        return cls(family=d["family"], config=d["config"], kind=d["kind"],
                   languages=tuple(d["languages"]), files=d["files"], data=d["data"],
                   results=d.get("results") or {}, made_by=d.get("made_by") or {},
                   backend=backend)


def _save_weights(save_file: Any, weights: Mapping[str, torch.Tensor], path: Path,
                  card: PackageCard, out: Path) -> None:
    """safetensors' ``save_file``; its error for a failed write (a full disk: "code: 28")
    raised as the OSError it stands for, naming the package, so the CLI says what happened."""
    import errno
    import re

    from safetensors import SafetensorError

    try:
        save_file({k: v.detach().contiguous().cpu() for k, v in weights.items()}, str(path),
                  metadata={"format": FORMAT, "family": card.family})
        canonical_safetensors(path)  # the same weights, the same bytes
    except SafetensorError as e:
        code = re.search(r"(?:os error|code:) (\d+)", str(e))
        number = int(code.group(1)) if code else errno.EIO
        raise OSError(number, os.strerror(number), str(out)) from None


def is_package(path: str | Path) -> bool:
    return (Path(path) / CARD_NAME).is_file()


def write_package(out: str | Path, card: PackageCard, weights: Mapping[str, torch.Tensor] | None,
                  files: Mapping[str, str | Path | bytes] = (), *, overwrite: bool = False
                  ) -> Path:
    """Write the package ``out``: the card, the weights as safetensors (None: none, an ONNX
    package's graphs hold them), and each side file (``files``: name inside the package -> a
    file to copy, or its bytes). The names must be the ones ``card.files`` lists."""
    from safetensors.torch import save_file

    out = Path(out)
    if out.exists() and not overwrite:
        raise DataError(f"{out} already exists; pass --overwrite to replace it")
    if out.exists() and not out.is_dir():
        raise DataError(f"{out} exists and is not a directory; give a directory path")
    missing = sorted(set(card.files.values()) - set(dict(files)))
    if missing:
        raise ValueError(f"the card names files that are not given: {missing}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(out.parent, out.name)
    try:
        if weights is not None:
            _save_weights(save_file, weights, tmp / WEIGHTS_NAME, card, out)
        for name, src in dict(files).items():
            if isinstance(src, bytes):
                (tmp / name).write_bytes(src)
            else:
                shutil.copyfile(src, tmp / name)
        (tmp / CARD_NAME).write_text(json.dumps(card.to_json(), indent=1, ensure_ascii=False)
                                     + "\n", encoding="utf-8")
        # safetensors writes 0600; a package is shared, so every file gets the mode a plain
        # open() gives under the user's umask (and the directory a plain mkdir's).
        mode = 0o666 & ~current_umask()
        for f in tmp.iterdir():
            os.chmod(f, mode)
        move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def write_card(path: str | Path, card: PackageCard) -> Path:
    """Replace the card of the package at ``path`` with ``card`` (written next to it and
    renamed into place: a killed write leaves the old card)."""
    card_path = Path(path) / CARD_NAME
    atomic_write_text(card_path, json.dumps(card.to_json(), indent=1, ensure_ascii=False) + "\n")
    return card_path


def move_into_place(made: Path, out: Path) -> None:
    """Rename the finished directory ``made`` to ``out``, replacing what ``out`` held (moved
    aside first, removed last, so ``out`` is never half-written)."""
    if out.exists():
        old = out.with_name(f".{out.name}.replaced")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        made.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        made.rename(out)


def graph_files(path: str | Path, card: PackageCard, roles: Sequence[str]) -> dict[str, Path]:
    """The ONNX graphs of the package at ``path`` by role (each in ``card.files``); one
    DataError naming the first role the card lacks."""
    missing = [role for role in roles if role not in card.files]
    if missing:
        raise DataError(f"{path}: an ONNX package without its {missing[0]} graph; export the "
                        "model again")
    return {role: Path(path) / card.files[role] for role in roles}


def read_card(path: str | Path) -> PackageCard:
    """The card of the package at ``path``."""
    card_path = Path(path) / CARD_NAME
    try:
        d = json.loads(card_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"{card_path}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{card_path}:{e.lineno}: not valid JSON ({e.msg}); export the model "
                        "again") from None
    card = PackageCard.from_json(d, card_path)
    for role, name in card.files.items():
        if not (Path(path) / name).is_file():
            raise DataError(f"{Path(path) / name}: the package's {role} file is missing; export "
                            "the model again")
    return card


def weights_header(path: str | Path) -> dict[str, tuple[tuple[int, ...], str]]:
    """The package's tensors as its safetensors header lists them: name -> (shape, dtype),
    read without loading any tensor."""
    from safetensors import SafetensorError, safe_open

    file = Path(path) / WEIGHTS_NAME
    if not file.is_file():
        raise DataError(f"{file} is missing: a package holds its weights there")
    try:
        with safe_open(str(file), framework="pt") as f:
            return {k: (tuple(f.get_slice(k).get_shape()), str(f.get_slice(k).get_dtype()))
                    for k in f.keys()}
    except (SafetensorError, OSError) as e:
        raise DataError(f"{file}: unreadable weights ({e}); export the model again") from None


#: safetensors' dtype names of floating-point tensors (the weights of a network).
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")


def check_against_header(model: torch.nn.Module, header: Mapping[str, tuple[tuple[int, ...], str]],
                         source: object) -> None:
    """The model the card describes (built on the ``meta`` device: no memory) against the
    weights the package holds, before anything real is built: the same tensor names and shapes,
    floating-point weights where the model has them. One DataError names the first mismatch,
    so a card that asks for a model of 10^9 parameters beside weights of a few is refused
    without allocating it."""
    own = model.state_dict()
    for name, tensor in own.items():
        if name not in header:
            raise DataError(f"{source}: the card's model has tensor {name!r}, the weights do not; "
                            "the card and the weights disagree (export the model again)")
        shape, dtype = header[name]
        if tuple(tensor.shape) != shape:
            raise DataError(f"{source}: the card's model expects {name!r} of shape "
                            f"{tuple(tensor.shape)}, the weights hold {shape}; the card's config "
                            "and the weights disagree (export the model again)")
        if tensor.is_floating_point() and dtype not in FLOAT_DTYPES:
            raise DataError(f"{source}: weight {name!r} is stored as {dtype}, not floating "
                            "point: not a model's weights")
    extra = sorted(set(header) - set(own))
    if extra:
        raise DataError(f"{source}: the weights hold {len(extra)} tensor(s) the card's model "
                        f"lacks, e.g. {extra[:3]} (export the model again)")


def read_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """The package's weights (safetensors: reading them runs no code); :func:`load_network`
    checks them against the model."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    file = Path(path) / WEIGHTS_NAME
    if not file.is_file():
        raise DataError(f"{file} is missing: a package holds its weights there")
    try:
        return load_file(str(file))
    except (SafetensorError, OSError) as e:
        raise DataError(f"{file}: unreadable weights ({e}); export the model again") from None


def load_network(path: str | Path, card: PackageCard, builders: Mapping[str, Any]
                 ) -> torch.nn.Module:
    """The package's network, in eval mode: the card's model (``card.build`` by its family's
    entry in ``builders``) first on the ``meta`` device, checked against the weights' header
    (:func:`check_against_header`: a card is untrusted input, and its sizes are not built
    before the weights show them), then for real with the weights loaded and checked
    (:func:`load_weights`: types, NaN, inf)."""
    def build() -> torch.nn.Module:
        return card.build(builders, path)

    header = weights_header(path)
    try:
        with torch.device("meta"):
            sketch = build()
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as e:
        raise DataError(f"{path}: the card's model cannot be built ({e}); export the model "
                        "again") from None
    check_against_header(sketch, header, path)
    del sketch
    return load_weights(build(), read_weights(path), path)


def load_weights(model: torch.nn.Module, weights: Mapping[str, torch.Tensor], source: object
                 ) -> torch.nn.Module:
    """``weights`` into ``model`` (put in eval mode), which must hold exactly those tensors at
    those shapes, of usable types and values (:func:`speechlab.nn.weights.load_weights`): a
    package whose card and weights disagree is named, not half loaded."""
    from speechlab.nn.weights import load_weights as checked

    return checked(model, weights, source, hint="; export the model again")
