"""Which models a server holds and what each one offers.

The models are loaded once, when the server starts, from the paths given on the command line
(anything :func:`speechlab.load` takes) or, with none, from the last ``make demo`` run
(:data:`DEMO_MODELS`). Each gets a short name (:func:`unique_names`); clients name models by it
and never by a path.

:class:`ServedModel` says what a loaded model can do in the page: ``transcribe`` and ``stream``
(ASR), ``synthesize`` (TTS), ``attention`` (anything with a wav2vec 2.0 encoder: the diagnosis
panel) and ``lattice`` (a CTC-topology model with its decoding graph: the topology panel).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speechlab.contract import Encoder, Model, as_encoder, as_recognizer, recognition_options
from speechlab.errors import ConfigError, DataError

#: The models of ``make demo`` the server offers when given no path, under its ``--out``
#: directory (``exp/demo``): paper -> model names in ``<paper>/models/``.
DEMO_MODELS: dict[str, tuple[str, ...]] = {
    "multisoftmax": ("multisoftmax_lid",),
    "topologies": ("en_S1-T1", "hi_S1-T1"),
    "local-attention": ("Orig", "pretrained"),
    "salad": ("big_salad",),
}


def demo_paths(root: Path) -> tuple[list[Path], list[Path]]:
    """The demo's model directories under ``root``: (found, missing)."""
    found: list[Path] = []
    missing: list[Path] = []
    for paper, names in DEMO_MODELS.items():
        for name in names:
            path = root / paper / "models" / name
            (found if path.is_dir() else missing).append(path)
    return found, missing


def unique_names(paths: Sequence[Path]) -> list[str]:
    """One name per path: its last part (``OUT/models/NAME`` -> ``NAME``, a package directory
    -> its name), with the parts above it prefixed where two paths would share a name."""
    parts = [Path(p).resolve().parts for p in paths]
    depth = [1] * len(paths)

    def name(i: int) -> str:
        kept = [p for p in parts[i][-depth[i]:] if p != "models"]
        return "/".join(kept) or parts[i][-1]

    while True:
        names = [name(i) for i in range(len(paths))]
        grown = False
        for i, n in enumerate(names):
            # grow a name while another, different path has it (the same path twice: numbered)
            clash = any(names[j] == n and parts[j] != parts[i] for j in range(len(paths)))
            if clash and depth[i] < len(parts[i]):
                depth[i] += 1
                grown = True
        if not grown:
            break
    seen: dict[str, int] = {}
    out: list[str] = []
    for n in names:  # the same path twice: number the repeats
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}-{seen[n]}")
    return out


@dataclass(frozen=True)
class ServedModel:
    """A loaded model under the name clients use, with what ``GET /api/models`` says of it
    (read from the model's contract, :mod:`speechlab.contract`)."""

    name: str
    model: Model

    @property
    def kind(self) -> str:
        return self.model.kind

    @property
    def streaming(self) -> bool:
        return "stream" in self.model.capabilities

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(self.model.languages)

    def describe(self) -> dict[str, Any]:
        """The entry of ``GET /api/models``."""
        return {"name": self.name, "kind": self.kind, "streaming": self.streaming,
                "languages": list(self.languages)}

    @property
    def encoder(self) -> Encoder | None:
        """The wav2vec 2.0 encoder to diagnose (``.model``, ``.waveform``), if there is one."""
        if self.kind != "ssl" and "attention" not in self.model.capabilities:
            return None
        return as_encoder(self.model, self.name)

    @property
    def has_lattice(self) -> bool:
        return "lattice" in self.model.capabilities

    @property
    def lid_free(self) -> bool:
        """Whether the model finds the language itself (LID bars and early stopping apply)."""
        return "early_stop" in self.model.capabilities

    def options(self, query: Any) -> dict[str, Any]:
        """``language``, ``method``, ``tau``, ``s_th``, ``languages``, ``nbest`` and the
        hotwords of a request's query string, checked as ``speechlab transcribe`` checks its
        options (:func:`speechlab.contract.recognition_options`). The beam is the model's: a
        client may choose among a model's searches, not make one as wide as it likes."""
        return recognition_options(as_recognizer(self.model, self.name),
                                   language=query.get("language") or None,
                                   method=query.get("method") or None,
                                   tau=query.get("tau"), s_th=query.get("s_th"),
                                   languages=query.get("languages"), nbest=query.get("nbest"),
                                   hotwords=query.get("hotwords"),
                                   hotword_score=query.get("hotword_score"), name=self.name)

    def warm(self) -> None:
        """Do once, now, what a recognizer that reads whole recordings does on its first
        request from the page (which asks for its words' confidences): a CTC-topology model
        turns its decoding graph into the lattice search's arrays there (en_ctc_t2: seconds),
        which the first person to speak would otherwise wait for. Half a second of silence,
        with the page's options."""
        if self.kind != "asr" or self.streaming or "transcribe" not in self.model.capabilities:
            return
        import numpy as np

        rate = self.model.sample_rate
        as_recognizer(self.model, self.name).transcribe(
            np.zeros(rate // 2, np.float32), rate, **self.options({"nbest": "1"}))

    def capabilities(self) -> list[str]:
        """What the page may offer for this model, in a fixed order."""
        order = ("transcribe", "stream", "early_stop", "hotwords", "synthesize", "attention",
                 "lattice")
        own = set(self.model.capabilities) | ({"attention"} if self.kind == "ssl" else set())
        return [c for c in order if c in own]


def load_models(paths: Sequence[Path], *, say: Any = print, backend: str | None = None,
                device: str | None = None) -> dict[str, ServedModel]:
    """Every model at ``paths`` loaded (:func:`speechlab.load`), by name; ``say`` reports each.
    ``backend="onnx"``: the models that run on onnxruntime do (the RNN-T, the TTS acoustic
    models), the others stay in PyTorch. ``device``: the networks of the models that can
    move there do (:meth:`speechlab.contract.Model.to`); the others stay on the CPU, and
    ``say`` says so."""
    from speechlab.inference import load

    if not paths:
        raise DataError("no model to serve")
    served: dict[str, ServedModel] = {}
    for name, path in zip(unique_names(paths), paths):
        model = load(path)
        if backend == "onnx" and "onnx" in model.capabilities:
            model = model.onnx()
        where = ""
        if device is not None:
            try:
                model = model.to(device)
                where = f" on {device}"
            except ConfigError as e:
                where = f" on the CPU ({e})"
        served[name] = ServedModel(name, model)
        try:
            served[name].warm()
            failed = ""
        except Exception as e:  # noqa: BLE001 - said, and the others are still served
            failed = (f"; its first request failed ({type(e).__name__}: "
                      f"{str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}), "
                      "so the page's requests to it may fail too")
        on = model.backend
        say(f"  {name}: {served[name].kind} model from {path}" + (f" ({on})" if on != "torch"
                                                                   else "") + where + failed)
    return served
