"""Speech from phone-aligned labels with a trained acoustic model: what a model directory holds
besides its checkpoint, and the :class:`Synthesizer` built from it.

A model directory (``OUT/models/NAME`` of ``speechlab reproduce salad``) holds the checkpoint
(its card rebuilds the model, :func:`speechlab.tts.model.load`) and two side files, written
when its training starts (:func:`write_model_files`):

- ``tts.json`` (:data:`SIDECAR`): the input and output normalizers fitted on the training
  data, the longest training phone (frames) and the question set's source;
- ``questions.hed`` (:data:`QUESTIONS_NAME`): the question set itself, so the directory is
  usable without the file it was trained with.

:class:`Synthesizer` turns :class:`~speechlab.tts.labels.Labels` into normalized inputs, the
model's acoustic frames and, through WORLD, a 16 kHz waveform (``speechlab synth``). The
acoustic model runs in PyTorch, or as an ONNX graph in onnxruntime (:mod:`.onnx_graphs`:
``to_onnx_package``, ``onnx``); everything around it is the same code.

Shapes: T frames, L input dims, O output dims (43).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from speechlab.contract import ModelBase, PackageParts
from speechlab.devices import device_of
from speechlab.errors import DataError
from speechlab.files import atomic_path, scratch_dir
from speechlab.tts.acoustic import SAMPLE_RATE, OutputNormalizer, synthesize
from speechlab.tts.labels import InputNormalizer, Labels
from speechlab.tts.questions import QuestionSet

SIDECAR = "tts.json"      # in each model directory: normalizers, question set source
QUESTIONS_NAME = "questions.hed"


def write_model_files(model_dir: Path, stats: dict, question_file: str | None) -> None:
    """The side files of a model directory: ``stats`` (``TtsData.stats()``: the normalizers)
    and the question set (the file ``question_file``, or the project's English set)."""
    from speechlab.files import atomic_write_json, atomic_write_text
    from speechlab.tts.questions import english_questions

    text = Path(question_file).read_text(encoding="utf-8") if question_file else english_questions()
    atomic_write_text(model_dir / QUESTIONS_NAME, text)
    atomic_write_json(model_dir / SIDECAR, stats)


def write_wav(path: Path, wav: np.ndarray) -> None:
    """(samples,) float speech as a 16 kHz 16-bit wav, written under a temporary name."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, wav, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    with atomic_path(path) as tmp:
        tmp.write_bytes(buf.getvalue())


@dataclass(frozen=True)
class Speech:
    """What synthesis gives: the waveform at ``sample_rate`` and the acoustic ``features`` (T,
    43: 40 mel-cepstra, log-F0, voicing, V/UV flag; denormalized) it was vocoded from."""

    waveform: np.ndarray
    sample_rate: int
    features: np.ndarray

    @property
    def f0(self) -> np.ndarray:
        """(T,) F0 in Hz, 0 where unvoiced."""
        from speechlab.tts.acoustic import f0_of

        return f0_of(self.features)


@dataclass
class Synthesizer(ModelBase):
    """A trained acoustic model with the normalizers and questions of its training data.
    ``window``: SALAD attends within windows of this many frames (the training window; None:
    the whole utterance). ``model`` is the PyTorch module or its ONNX graph
    (:class:`~speechlab.tts.onnx_graphs.OnnxAcousticModel`), called the same way."""

    model: nn.Module
    inputs: InputNormalizer
    outputs: OutputNormalizer
    max_duration: int
    questions: QuestionSet
    source: Path
    window: int | None = 120
    question_text: str = ""

    kind = "tts"
    family = "tts"
    title = "a TTS acoustic model"
    CAPABILITIES = frozenset({"synthesize", "onnx"})
    languages = ("en",)
    sample_rate = SAMPLE_RATE

    @classmethod
    def load(cls, model_dir: str | Path) -> Synthesizer:
        """The model trained in ``model_dir`` (its checkpoint, ``tts.json`` and
        ``questions.hed``), in eval mode."""
        from speechlab.tts.features import read_stats
        from speechlab.tts.model import load
        from speechlab.tts.questions import load_questions

        model_dir = Path(model_dir)
        sidecar = model_dir / SIDECAR
        if not sidecar.is_file():
            raise DataError(f"{model_dir}: no {SIDECAR} (normalizers); give a model directory "
                            "written by 'speechlab reproduce salad' (OUT/models/NAME)")
        inputs, outputs, max_duration, _ = read_stats(sidecar)
        questions = load_questions(model_dir / QUESTIONS_NAME)
        window = json.loads(sidecar.read_text(encoding="utf-8")).get("window", 120)
        return cls(load(model_dir), inputs, outputs, max_duration, questions, model_dir, window,
                   question_text=(model_dir / QUESTIONS_NAME).read_text(encoding="utf-8"))

    from_run = load

    @property
    def backend(self) -> str:
        """What runs the acoustic model: ``"torch"`` or ``"onnx"``."""
        return getattr(self.model, "backend", "torch")

    def features(self, labels: Labels) -> np.ndarray:
        """(T, L) normalized inputs of ``labels``, checked against what the model takes."""
        from speechlab.tts.features import normalize_utterance, utterance_arrays

        utt = normalize_utterance("synth", utterance_arrays(labels, None, self.questions),
                                  self.inputs, None, self.max_duration)
        expected = self.model.config.input_dim
        if utt.phone_x.shape[1] + 2 != expected:
            raise DataError(f"{self.source}: the model takes {expected} inputs, its question set "
                            f"gives {utt.phone_x.shape[1] + 2}")
        return utt.x()

    @torch.no_grad()
    def acoustic(self, labels: Labels, window: int | None = None) -> np.ndarray:
        """(T, O) acoustic frames (denormalized) for ``labels``; SALAD attends within windows
        of ``window`` frames (None: the whole utterance)."""
        device = device_of(self.model)
        x = torch.from_numpy(self.features(labels))[None].to(device)
        y = self.model(x, torch.tensor([x.shape[1]], device=device),
                       window=window)[0].float().cpu().numpy()
        if not np.isfinite(y).all():
            raise DataError(f"{self.source}: the model predicts NaN or inf (its weights are "
                            "broken); use another checkpoint")
        return self.outputs.inverse(np.asarray(y))

    def _networks_to(self, device: torch.device) -> None:
        """The acoustic model on ``device``; the vocoder (WORLD) stays on the CPU."""
        self.model.to(device)

    def synthesize(self, text: str | None = None, labels: Labels | str | Path | None = None,
                   *, window: int | None | str = "model") -> Speech:
        """Speech for ``text`` (festival's front end makes the labels and durations) or for
        phone-aligned HTS ``labels`` (a :class:`Labels` or a label file); ``window`` as the
        model was trained (default) or given."""
        if (text is None) == (labels is None):
            raise DataError("synthesize: give text or labels, not both")
        if text is not None and not isinstance(text, str):
            raise DataError(f"synthesize: text must be a string, got a {type(text).__name__} "
                            "(phone-aligned labels go in labels=)")
        if text is not None:
            labels = labels_of_text(text)
        elif not isinstance(labels, Labels):
            from speechlab.tts.labels import load_labels

            labels = load_labels(Path(labels))
        win = self.window if window == "model" else window
        feats = self.acoustic(labels, win)
        return Speech(synthesize(feats), SAMPLE_RATE, feats)

    # -----------------------------------------------------------------------------------------
    # Export

    def to_package(self) -> PackageParts:
        """The card, weights and side files of this synthesizer's package."""
        self._needs_torch()
        return self.package_parts(self.model, self._data(), self._files())

    def to_onnx_package(self) -> PackageParts:
        """The card and side files of a package whose acoustic model is an ONNX graph."""
        from speechlab.tts.onnx_graphs import FILE, export_acoustic

        self._needs_torch()
        return self.package_parts(self.model, self._data(), self._files(),
                                  onnx={"acoustic": (FILE, export_acoustic(self.model))})

    def onnx(self, threads: int = 1) -> Synthesizer:
        """This synthesizer with its acoustic model exported to an ONNX graph (in memory) and
        run by onnxruntime on ``threads`` threads."""
        from speechlab.tts.onnx_graphs import OnnxAcousticModel, export_acoustic

        if self.backend == "onnx":
            return self
        graph = OnnxAcousticModel(export_acoustic(self.model), self.model.config, threads)
        return replace(self, model=graph)

    def _needs_torch(self) -> None:
        if self.backend != "torch":
            raise DataError(f"{self.source}: this synthesizer runs an ONNX graph; to export "
                            "it, load the model it was exported from (OUT/models/NAME or a "
                            "PyTorch package)")

    def _data(self) -> dict[str, Any]:
        return {"inputs": self.inputs.to_dict(), "outputs": self.outputs.to_dict(),
                "max_duration": self.max_duration, "window": self.window,
                "streaming": False, "kind": self.model.config.kind}

    def _files(self) -> dict[str, tuple[str, Any]]:
        return {"questions": (QUESTIONS_NAME, self.question_text.encode("utf-8"))}

    @classmethod
    def from_package(cls, path: Path, card, model) -> Synthesizer:
        """The synthesizer of the package at ``path`` and its ``model`` (None for an ONNX
        package: its graph holds the weights)."""
        from speechlab.config import from_dict
        from speechlab.tts.model import AcousticModelConfig
        from speechlab.tts.questions import load_questions

        if model is None:
            from speechlab.tts.onnx_graphs import OnnxAcousticModel

            from speechlab.package import graph_files

            model = OnnxAcousticModel(graph_files(path, card, ["acoustic"])["acoustic"],
                                      from_dict(AcousticModelConfig, dict(card.config)))
        d = card.data
        qpath = path / card.files["questions"]
        return cls(model.eval(), InputNormalizer.from_dict(d["inputs"]),
                   OutputNormalizer.from_dict(d["outputs"]), int(d["max_duration"]),
                   load_questions(qpath), path, d["window"], qpath.read_text(encoding="utf-8"))


def labels_of_text(text: str) -> Labels:
    """Phone-aligned HTS labels of ``text`` from festival's front end (the SLT voice the
    embedded corpus was made with)."""

    from speechlab.tts.corpus import festival_synthesize
    from speechlab.tts.labels import parse_labels

    if not text.strip():
        raise DataError("synthesize: the text is empty")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: bytes that were not UTF-8 (argv, JSON)
        raise DataError(f"synthesize: the text is not valid Unicode at character {e.start + 1} "
                        f"({text[e.start]!r}); give UTF-8 text") from None
    with scratch_dir("speechlab-festival") as tmp:
        _, lines = festival_synthesize([("text", text)], Path(tmp))["text"]
    return parse_labels(lines, "festival's labels of the text")


def synthesize_labels(model_dir: Path, labels: Labels, window: int | None = None) -> np.ndarray:
    """(samples,) float32 16 kHz speech for :class:`~speechlab.tts.labels.Labels` with the
    model trained in ``model_dir`` (its checkpoint, ``tts.json`` and ``questions.hed``)."""
    return Synthesizer.load(model_dir).synthesize(labels=labels, window=window).waveform
