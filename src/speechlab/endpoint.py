"""Endpoints: where one utterance of a live stream ends and the next begins.

A stream (:class:`speechlab.contract.Stream`) says ``is_endpoint`` when one of three rules
holds for the utterance it is decoding (the rules sherpa-onnx and Kaldi's online decoders use):

1. ``silence_before_text`` seconds of trailing silence and nothing recognized yet (someone
   opened the microphone and said nothing);
2. ``silence_after_text`` seconds of trailing silence after some text (a pause after a
   sentence);
3. the utterance has lasted ``max_utterance`` seconds, whatever it holds.

*Trailing silence* is what the recognizer heard as nothing: for a transducer the time since
its best hypothesis last emitted a label, for a stream gated by a voice-activity detector the
time since the detector last heard speech. ``stream.reset()`` then closes the utterance (its
:class:`~speechlab.contract.Transcript`) and starts the next.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError

RULES = ("silence_before_text", "silence_after_text", "max_utterance")


@dataclass(frozen=True)
class EndpointConfig:
    """The three rules' thresholds in seconds (module doc); ``inf`` switches a rule off."""

    silence_before_text: float = ranged(2.4, gt=0, allow_inf=True, why="seconds of silence")
    silence_after_text: float = ranged(1.2, gt=0, allow_inf=True, why="seconds of silence")
    max_utterance: float = ranged(20.0, gt=0, allow_inf=True, why="seconds")

    def __post_init__(self) -> None:
        check_fields(self)

    def rule(self, trailing_silence: float, utterance: float, has_text: bool) -> str | None:
        """The first rule that holds (its name in :data:`RULES`), or None."""
        if not has_text and trailing_silence >= self.silence_before_text:
            return "silence_before_text"
        if has_text and trailing_silence >= self.silence_after_text:
            return "silence_after_text"
        if utterance >= self.max_utterance:
            return "max_utterance"
        return None

    @classmethod
    def from_options(cls, given: Mapping[str, Any], flag: str = "") -> EndpointConfig:
        """The config a request or a command line asks for: ``given`` maps a rule's name to
        seconds (a number, or text from a query string; None or absent: the default). Each bad
        value is one ConfigError naming its option (``flag="--"``: as a CLI option)."""
        values: dict[str, float] = {}
        for f in fields(cls):
            raw = given.get(f.name)
            if raw is None:
                continue
            option = flag + (f.name.replace("_", "-") if flag else f.name)
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise ConfigError(f"{option} must be seconds (a number, or inf), got "
                                  f"{raw!r}") from None
            if not value > 0 or math.isnan(value):
                raise ConfigError(f"{option} must be > 0 seconds (inf: never), got {raw!r}")
            values[f.name] = value
        return cls(**values)
