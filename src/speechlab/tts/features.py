"""A TTS corpus as model inputs and targets: labels + wavs -> normalized (x, y) per utterance.

:func:`extract` computes, for each utterance, the question answers of each phone, the frame ->
phone map and the two per-frame dims (:mod:`.labels`), and the 43 WORLD dims (:mod:`.acoustic`),
cut to the labels' frame count; results are cached per utterance (``features/<split>/<id>.npz``)
so a rerun or a worker process only reads them. :func:`prepare` fits the normalizers on the
training split (inputs: z-norm of the numeric answers; outputs: min-max to [0, 1]) and returns a
:class:`TtsData`.

Inputs are kept per phone, not per frame (``phone_x[frame_phone]`` gives the frames): a phone
lasts about 16 frames, so 100 minutes of training speech take 130 MB instead of 2 GB.

Shapes: N phones, T frames, Q question dims, L = Q + 2 input dims, O = 43 output dims.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speechlab.errors import DataError
from speechlab.files import atomic_path, atomic_write_json, removed_on_failure
from speechlab.tts.acoustic import SAMPLE_RATE, VUV, OutputNormalizer, analyse
from speechlab.tts.corpus import TtsUtterance, check_pair
from speechlab.tts.labels import InputNormalizer, Labels, load_labels, phone_features
from speechlab.tts.questions import QuestionSet, load_questions

log = logging.getLogger(__name__)

STATS_NAME = "stats.json"


@dataclass
class TtsUtteranceData:
    """One utterance, ready for a model: (N, Q) phone answers, (T,) frame -> phone, (T, 2)
    per-frame dims, (T, O) acoustic frames, and each phone's name."""

    id: str
    phone_x: np.ndarray
    frame_phone: np.ndarray
    extra: np.ndarray
    y: np.ndarray
    phones: list[str]

    @property
    def num_frames(self) -> int:
        return len(self.frame_phone)

    def x(self) -> np.ndarray:
        """(T, L) frame inputs."""
        return np.concatenate([self.phone_x[self.frame_phone], self.extra], axis=1)

    @property
    def frame_phones(self) -> list[str]:
        return [self.phones[i] for i in self.frame_phone]


@dataclass(frozen=True)
class Normalization:
    """What turns labels into model inputs and model outputs back into acoustic frames, fitted
    on the training split: the z-norm of the question answers (``inputs``), the min-max of the
    acoustic frames (``outputs``), the longest training phone in frames (``max_duration``, the
    scale of the duration input) and the question set's source. A model directory's side file
    keeps it (:meth:`to_dict`; :func:`read_stats` reads it back)."""

    inputs: InputNormalizer
    outputs: OutputNormalizer
    max_duration: int
    questions: str

    def to_dict(self) -> dict:
        return {"inputs": self.inputs.to_dict(), "outputs": self.outputs.to_dict(),
                "max_duration": self.max_duration, "questions": self.questions}

    @classmethod
    def from_dict(cls, d: dict) -> Normalization:
        return cls(InputNormalizer.from_dict(d["inputs"]), OutputNormalizer.from_dict(d["outputs"]),
                   int(d["max_duration"]), str(d["questions"]))


@dataclass
class TtsData:
    """Normalized train/dev/test utterances and what normalized them."""

    train: list[TtsUtteranceData]
    dev: list[TtsUtteranceData]
    test: list[TtsUtteranceData]
    norm: Normalization
    # What the corpus is, for the report: festival's embedded voice, or a --corpus directory.
    corpus: str = ""

    @property
    def input_dim(self) -> int:
        return self.train[0].phone_x.shape[1] + 2

    def stats(self) -> dict:
        return {**self.norm.to_dict(), "input_dim": self.input_dim}


def _frames(labels: Labels) -> tuple[np.ndarray, np.ndarray]:
    """(T,) frame -> phone index and (T,) frame position inside its phone, from frame 0 (frames
    before the first phone belong to it)."""
    durations = labels.durations.astype(np.int64)
    durations[0] += int(labels.starts[0])
    phone = np.repeat(np.arange(len(durations)), durations)
    within = np.arange(len(phone)) - np.repeat(np.cumsum(durations) - durations, durations)
    return phone, within


def utterance_arrays(labels: Labels, wav: np.ndarray | None, questions: QuestionSet) -> dict:
    """The raw arrays of one utterance (unnormalized; ``y`` None without a wav)."""
    phone, within = _frames(labels)
    durations = np.bincount(phone, minlength=len(labels.contexts))
    arrays = {"phone_x": phone_features(labels, questions), "frame_phone": phone,
              "within": within, "durations": durations, "phones": np.asarray(labels.phones)}
    if wav is not None:
        arrays["y"] = analyse(wav, SAMPLE_RATE, len(phone))
    return arrays


def _extract_one(args: tuple[TtsUtterance, Path, str | None, float]) -> Path:
    import soundfile as sf

    utt, cache, question_file, tolerance = args
    if cache.exists():
        return cache
    labels = load_labels(utt.labels)
    check_pair(utt.wav, labels, tolerance, utt.id)
    wav, _ = sf.read(str(utt.wav), dtype="float32")
    arrays = utterance_arrays(labels, wav, load_questions(question_file))
    with atomic_path(cache) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
    return cache


def extract(utts: Sequence[TtsUtterance], cache_dir: Path, question_file: str | None,
            tolerance: float = 0.1, workers: int = 1) -> list[Path]:
    """Compute (or find cached) the raw arrays of every utterance, in ``workers`` processes."""
    jobs = [(u, cache_dir / f"{u.id}.npz", question_file, tolerance) for u in utts]
    if workers <= 1 or len(jobs) < 4:
        return [_extract_one(j) for j in jobs]
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(workers) as pool:
        return pool.map(_extract_one, jobs, chunksize=4)


def _load(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def normalize_utterance(utt_id: str, arrays: dict, inputs: InputNormalizer,
                        outputs: OutputNormalizer | None, max_duration: int) -> TtsUtteranceData:
    phone, within = arrays["frame_phone"], arrays["within"]
    dur = arrays["durations"][phone].astype(np.float32)
    extra = np.stack([np.minimum(dur / max(max_duration, 1), 1.0), (within + 0.5) / dur], axis=1)
    y = arrays.get("y")
    return TtsUtteranceData(utt_id, inputs(arrays["phone_x"]), phone.astype(np.int64),
                            extra.astype(np.float32),
                            outputs(y) if (y is not None and outputs is not None)
                            else np.zeros((len(phone), 0), np.float32),
                            [str(p) for p in arrays["phones"]])


def _raw_features(splits: dict[str, Sequence[TtsUtterance]], feat_dir: Path,
                  question_file: str | None, tolerance: float, workers: int, write: bool,
                  made: list[Path]) -> dict[str, list[tuple[str, dict]]]:
    """Each split's (id, raw arrays), computed (files new to the cache recorded in ``made``) or
    read from the cache; the train split must hold voiced frames."""
    raw: dict[str, list[tuple[str, dict]]] = {}
    for split, utts in splits.items():
        if not utts:
            raise DataError(f"the {split} split has no utterance")
        paths = [feat_dir / split / f"{u.id}.npz" for u in utts]
        if write:
            made.extend(p for p in paths if not p.exists())
            paths = extract(utts, feat_dir / split, question_file, tolerance, workers)
        raw[split] = [(u.id, _load(p)) for u, p in zip(utts, paths)]
        if split == "train" and not any(a["y"][:, VUV].any() for _, a in raw[split]):
            # F0 is learned from voiced frames alone; without any, every F0 column of the
            # results would be NaN after the whole training.
            raise DataError(f"no voiced frames in the training data ({len(utts)} utterances, "
                            f"e.g. {utts[0].wav}): WORLD found no F0 in any of them; check that "
                            "the train wavs are speech (not noise, silence or whisper)")
    return raw


def prepare(splits: dict[str, Sequence[TtsUtterance]], out: Path, question_file: str | None,
            *, tolerance: float = 0.1, workers: int = 1, write: bool = True) -> TtsData:
    """Features of every split, normalizers fitted on train; ``write=False`` only reads what a
    ``write=True`` call cached."""
    feat_dir = out / "features"
    questions = load_questions(question_file)
    # A call that fails (a bad utterance, no voiced frame) removes the features it computed;
    # those cached by an earlier run stay.
    with removed_on_failure(feat_dir) as made:
        raw = _raw_features(splits, feat_dir, question_file, tolerance, workers, write, made)
    train = [a for _, a in raw["train"]]
    dim = questions.dim
    if train[0]["phone_x"].shape[1] != dim:
        raise DataError(f"{feat_dir}: cached features have {train[0]['phone_x'].shape[1]} "
                        f"question dims, the question set {dim}; remove {feat_dir}")
    inputs = InputNormalizer.fit([a["phone_x"] for a in train], len(questions.binary), dim)
    outputs = OutputNormalizer.fit([a["y"] for a in train])
    norm = Normalization(inputs, outputs, int(max(a["durations"].max() for a in train)),
                         questions.source)
    data = TtsData(*[[normalize_utterance(i, a, norm.inputs, norm.outputs, norm.max_duration)
                      for i, a in raw[s]] for s in ("train", "dev", "test")], norm=norm)
    if write:
        atomic_write_json(feat_dir / STATS_NAME, data.stats())
    log.info("features: %s utterances, %d input dims", {s: len(v) for s, v in raw.items()},
             data.input_dim)
    return data


def read_stats(path: Path) -> tuple[InputNormalizer, OutputNormalizer, int, str]:
    """The :class:`Normalization` of a model directory's sidecar, as a tuple of its fields; a
    DataError names the file if it is missing, corrupt or incomplete."""
    from speechlab.files import read_json

    d = read_json(path, "normalizer file")
    try:
        norm = Normalization.from_dict(d)
        return norm.inputs, norm.outputs, norm.max_duration, norm.questions
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise DataError(f"{path}: incomplete or corrupt normalizer file ({type(e).__name__}: "
                        f"{e}); rerun the training that wrote it") from None
