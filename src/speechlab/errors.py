"""Errors a user sees.

Every bad input gets one :class:`SpeechlabError` whose message names the file, line or
utterance and says what to do. The CLI prints the message alone (no traceback).
"""

from __future__ import annotations


class SpeechlabError(Exception):
    """A user-facing error: bad input, missing tool, corrupt file."""


class DataError(SpeechlabError):
    """Bad data: unreadable audio, empty transcript, unknown symbol or language."""


class ConfigError(SpeechlabError):
    """A config file or command-line override that does not fit the config dataclass."""


class MissingToolError(SpeechlabError):
    """A Debian package or binary the command needs is not installed."""


def where(path: object, line: int | None = None, utt: str | None = None) -> str:
    """Format a location for error messages: ``file:line (utterance X)``."""
    s = str(path)
    if line is not None:
        s += f":{line}"
    if utt is not None:
        s += f" (utterance {utt!r})"
    return s
