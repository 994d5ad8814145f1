"""HTS full-context labels -> the per-frame linguistic input of the acoustic models (Sec. 3.2).

Each phone's label is turned into binary and numeric features by a question set
(:mod:`.questions`, evaluated as Merlin's front end does), replicated over the phone's
frames (5 ms each) as its duration dictates, and two dims are appended: the phone's duration
normalized to [0, 1] over the training data, and the frame's relative position inside the
phone, in (0, 1). :class:`InputNormalizer` z-normalizes the numeric columns with training
statistics (the binary ones and the two appended dims already lie in [0, 1]).

Shapes: N phones, T frames, Q question dims, L = Q + 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speechlab.errors import DataError
from speechlab.tts.questions import NO_PHONE, PHONES, QuestionSet

# 5 ms frames in HTK's 100 ns units.
FRAME_SHIFT = 50000
FRAME_SECONDS = FRAME_SHIFT * 1e-7

# The longest utterance a label file may describe: synthesis holds every frame of it at once,
# and utterances last seconds (a label time of 10^15 would ask for years of frames).
MAX_LABEL_SECONDS = 3600.0

_QUINPHONE = re.compile(r"^([^\^]+)\^([^-]+)-([^+]+)\+([^=]+)=([^@]+)@")


@dataclass(frozen=True)
class Labels:
    """One utterance's phone-aligned labels: (N,) start and end frame, and the contexts."""

    starts: np.ndarray
    ends: np.ndarray
    contexts: tuple[str, ...]
    source: str

    @property
    def durations(self) -> np.ndarray:
        return self.ends - self.starts

    @property
    def num_frames(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    @property
    def phones(self) -> list[str]:
        return [_QUINPHONE.match(c).group(3) for c in self.contexts]  # type: ignore[union-attr]


def parse_labels(lines: list[str], source: str = "<labels>",
                 phones: frozenset[str] | None = frozenset(PHONES)) -> Labels:
    """Phone-level HTS labels ``start end context`` (100 ns units) -> :class:`Labels` in 5 ms
    frames. Every line must be well formed, times must not go back, and (unless ``phones`` is
    None) each of the five context phones must be a known phone or ``x``; a DataError names
    the line otherwise."""
    starts, ends, contexts = [], [], []
    previous_end = 0
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        loc = f"{source}:{lineno}"
        parts = line.split()
        if len(parts) != 3:
            raise DataError(f"{loc}: expected 'start end full-context-label', got {line[:60]!r} "
                            "(phone-aligned HTS labels with times are needed)")
        try:
            start, end = int(parts[0]), int(parts[1])
        except ValueError:
            raise DataError(f"{loc}: times {parts[0]!r} {parts[1]!r} are not integers "
                            "(100 ns units)") from None
        if start < 0:
            raise DataError(f"{loc}: start time {start} is negative")
        if end < start or start < previous_end - FRAME_SHIFT // 2:
            raise DataError(f"{loc}: times {start} {end} go backwards")
        if end * 1e-7 > MAX_LABEL_SECONDS:
            raise DataError(f"{loc}: end time {end} is {end * 1e-7:.0f} s, more than "
                            f"{MAX_LABEL_SECONDS:.0f} s (an utterance lasts seconds); times are "
                            "in 100 ns units")
        previous_end = end
        m = _QUINPHONE.match(parts[2])
        if m is None:
            raise DataError(f"{loc}: {parts[2][:40]!r} is not a full-context label "
                            "(pp^p-c+n=nn@...)")
        if phones is not None:
            unknown = [p for p in m.groups() if p not in phones and p != NO_PHONE]
            if unknown:
                raise DataError(f"{loc}: unknown phone {unknown[0]!r}; the question set knows "
                                f"{len(phones)} phones (festival's radio set): map it to one "
                                "of them or pass a question file that asks about it")
        starts.append(round(start / FRAME_SHIFT))
        ends.append(round(end / FRAME_SHIFT))
        contexts.append(parts[2])
    if not contexts:
        raise DataError(f"{source}: no labels in it")
    if ends[-1] == 0:
        raise DataError(f"{source}: the labels span no time (every phone ends at 0); give "
                        "phone-aligned labels: start and end of each phone in 100 ns units")
    return Labels(np.asarray(starts), np.asarray(ends), tuple(contexts), source)


def load_labels(path: str | Path, phones: frozenset[str] | None = frozenset(PHONES)) -> Labels:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not a label
    except UnicodeDecodeError:
        raise DataError(f"{path}: a label file must be UTF-8 text") from None
    return parse_labels(text.splitlines(), str(path), phones)


def phone_features(labels: Labels, questions: QuestionSet) -> np.ndarray:
    """(N, Q) answers of the questions for each phone (as Merlin's front end gives them)."""
    return questions.answers(labels.contexts)


def frame_features(labels: Labels, questions: QuestionSet, max_duration: int) -> np.ndarray:
    """(T, Q + 2): each phone's answers repeated over its frames, then its duration over
    ``max_duration`` (the training data's longest phone, in frames; clipped to 1) and the
    frame's relative position ``(i + 0.5) / duration`` inside the phone."""
    per_phone = phone_features(labels, questions)
    durations = labels.durations.astype(np.int64)
    rows = np.repeat(np.arange(len(durations)), durations)
    within = np.arange(len(rows)) - np.repeat(np.cumsum(durations) - durations, durations)
    dur = durations[rows].astype(np.float32)
    extra = np.stack([np.minimum(dur / max(max_duration, 1), 1.0), (within + 0.5) / dur], axis=1)
    x = np.concatenate([per_phone[rows], extra.astype(np.float32)], axis=1)
    # Labels may start after 0 (a first phone at 0 is the usual case): frames before the first
    # phone take its features.
    first = int(labels.starts[0])
    return np.concatenate([np.repeat(x[:1], first, axis=0), x]) if first > 0 else x


@dataclass(frozen=True)
class InputNormalizer:
    """z-normalization of the numeric question columns ``[start, stop)`` with training
    statistics; the other columns pass unchanged."""

    start: int
    stop: int
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, frames: list[np.ndarray], start: int, stop: int) -> InputNormalizer:
        cols = np.concatenate([f[:, start:stop] for f in frames]).astype(np.float64)
        std = cols.std(axis=0)
        # A column constant over the training data carries nothing; dividing by 1 keeps it 0.
        return cls(start, stop, cols.mean(axis=0), np.where(std > 1e-6, std, 1.0))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = x.astype(np.float32, copy=True)
        y[:, self.start:self.stop] = (y[:, self.start:self.stop] - self.mean) / self.std
        return y

    def to_dict(self) -> dict:
        return {"start": self.start, "stop": self.stop, "mean": self.mean.tolist(),
                "std": self.std.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> InputNormalizer:
        return cls(int(d["start"]), int(d["stop"]), np.asarray(d["mean"]), np.asarray(d["std"]))
