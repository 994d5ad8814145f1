"""Language identification accuracy, directly and through the script of a hypothesis.

The multi-softmax paper (Section 6.2, Table 5) measures LID accuracy as "the percentage of
utterances with matching scripts between hypothesis and transcription": each Indian language
there has its own script, so the script a decoder writes in reveals the language it picked.
:func:`lid_by_script` computes exactly that, using :func:`script_of` to find the dominant
Unicode script of a hypothesis; :func:`lid_accuracy` scores explicit language decisions (e.g.
the argmax of averaged LID posteriors). Both return a :class:`LidAccuracy` with the pooled
(utterance-weighted) accuracy, per-language accuracy and the confusion counts.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from speechlab.errors import DataError

# Unicode blocks (inclusive code point ranges) of the scripts speech corpora use. Only letters
# and marks inside a block are counted (see script_of), so a block may contain punctuation or
# unassigned points. Blocks shared by several scripts (e.g. Coptic inside Greek) are cut so that
# every counted character really belongs to the script named.
_SCRIPT_BLOCKS: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x005A, "Latin"),
    (0x0061, 0x007A, "Latin"),
    (0x00C0, 0x024F, "Latin"),   # Latin-1 letters, Latin Extended-A/B
    (0x0250, 0x02AF, "Latin"),   # IPA extensions
    (0x0370, 0x03E1, "Greek"),
    (0x03F0, 0x03FF, "Greek"),
    (0x0400, 0x052F, "Cyrillic"),
    (0x0530, 0x058F, "Armenian"),
    (0x0590, 0x05FF, "Hebrew"),
    (0x0600, 0x06FF, "Arabic"),
    (0x0750, 0x077F, "Arabic"),
    (0x0900, 0x097F, "Devanagari"),
    (0x0980, 0x09FF, "Bengali"),
    (0x0A00, 0x0A7F, "Gurmukhi"),
    (0x0A80, 0x0AFF, "Gujarati"),
    (0x0B00, 0x0B7F, "Oriya"),
    (0x0B80, 0x0BFF, "Tamil"),
    (0x0C00, 0x0C7F, "Telugu"),
    (0x0C80, 0x0CFF, "Kannada"),
    (0x0D00, 0x0D7F, "Malayalam"),
    (0x0D80, 0x0DFF, "Sinhala"),
    (0x0E00, 0x0E7F, "Thai"),
    (0x0E80, 0x0EFF, "Lao"),
    (0x0F00, 0x0FFF, "Tibetan"),
    (0x1000, 0x109F, "Myanmar"),
    (0x10A0, 0x10FF, "Georgian"),
    (0x1100, 0x11FF, "Hangul"),  # conjoining jamo
    (0x1200, 0x137F, "Ethiopic"),
    (0x1780, 0x17FF, "Khmer"),
    (0x1E00, 0x1EFF, "Latin"),   # Latin Extended Additional (Vietnamese, ...)
    (0x1F00, 0x1FFF, "Greek"),   # Greek Extended
    (0x3040, 0x309F, "Hiragana"),
    (0x30A0, 0x30FF, "Katakana"),
    (0x3130, 0x318F, "Hangul"),  # compatibility jamo
    (0x3400, 0x4DBF, "Han"),
    (0x4E00, 0x9FFF, "Han"),
    (0xA8E0, 0xA8FF, "Devanagari"),  # Devanagari Extended
    (0xAC00, 0xD7AF, "Hangul"),  # syllables
    (0xF900, 0xFAFF, "Han"),     # compatibility ideographs
    (0xFF21, 0xFF3A, "Latin"),   # full-width Latin
    (0xFF41, 0xFF5A, "Latin"),
    (0x20000, 0x2A6DF, "Han"),
)
_BLOCK_STARTS = [start for start, _, _ in _SCRIPT_BLOCKS]
assert _BLOCK_STARTS == sorted(_BLOCK_STARTS), "script blocks must be sorted for bisect"

#: Every script name :func:`script_of` can return.
SCRIPTS: frozenset[str] = frozenset(name for _, _, name in _SCRIPT_BLOCKS)


def _char_script(ch: str) -> str | None:
    cp = ord(ch)
    i = bisect.bisect_right(_BLOCK_STARTS, cp) - 1
    if i < 0:
        return None
    start, end, name = _SCRIPT_BLOCKS[i]
    return name if start <= cp <= end else None


def script_of(text: str) -> str | None:
    """The dominant script of ``text`` (e.g. ``"Latin"``, ``"Devanagari"``, ``"Tamil"``).

    Counts letters and combining marks only: digits, punctuation (including the danda shared by
    many Indic scripts) and spaces identify no script. Ties go to the script seen first. Returns
    ``None`` for text without any letter of a known script (e.g. an empty hypothesis).
    """
    counts: Counter[str] = Counter()
    for ch in text:
        if unicodedata.category(ch)[0] not in "LM":
            continue
        name = _char_script(ch)
        if name is not None:
            counts[name] += 1
    if not counts:
        return None
    # Counter keeps first-insertion order and max() returns the first maximal item.
    return max(counts, key=counts.__getitem__)


@dataclass(frozen=True)
class LanguageAccuracy:
    correct: int
    total: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.total


@dataclass(frozen=True)
class LidAccuracy:
    """Utterance-level LID scores.

    ``per_language`` and ``confusion`` are keyed by the true language; ``confusion[t][p]`` counts
    utterances of language ``t`` identified as ``p`` (``"<none>"`` for no decision).
    """

    correct: int
    total: int
    per_language: Mapping[str, LanguageAccuracy]
    confusion: Mapping[str, Mapping[str, int]]

    @property
    def accuracy(self) -> float:
        """Pooled accuracy: correct utterances / all utterances."""
        return self.correct / self.total

    @property
    def macro_accuracy(self) -> float:
        """Unweighted mean of the per-language accuracies (the Avg. column of Table 5)."""
        return sum(v.accuracy for v in self.per_language.values()) / len(self.per_language)

    def to_dict(self) -> dict[str, Any]:
        return {
            "accuracy": self.accuracy,
            "macro_accuracy": self.macro_accuracy,
            "correct": self.correct,
            "total": self.total,
            "per_language": {k: {"correct": v.correct, "total": v.total, "accuracy": v.accuracy}
                             for k, v in self.per_language.items()},
            "confusion": {k: dict(v) for k, v in self.confusion.items()},
        }


NO_DECISION = "<none>"


def lid_accuracy(true_langs: Sequence[str], pred_langs: Sequence[str | None]) -> LidAccuracy:
    """Accuracy of predicted against true languages (parallel lists; ``None`` = no guess)."""
    if isinstance(true_langs, str) or isinstance(pred_langs, str):
        raise TypeError("true_langs and pred_langs must be lists of language labels")
    if len(true_langs) != len(pred_langs):
        raise DataError(f"{len(true_langs)} true languages but {len(pred_langs)} predictions")
    if not true_langs:
        raise DataError("LID accuracy is undefined for zero utterances")
    confusion: dict[str, Counter[str]] = {}
    for t, p in zip(true_langs, pred_langs):
        confusion.setdefault(t, Counter())[NO_DECISION if p is None else p] += 1
    per_language = {t: LanguageAccuracy(c[t], sum(c.values()))
                    for t, c in sorted(confusion.items())}
    return LidAccuracy(
        correct=sum(v.correct for v in per_language.values()),
        total=len(true_langs),
        per_language=per_language,
        confusion={t: dict(sorted(confusion[t].items())) for t in per_language},
    )


def lid_by_script(hyps: Sequence[str], true_langs: Sequence[str],
                  script_for_lang: Mapping[str, str]) -> LidAccuracy:
    """LID accuracy as in Table 5 of the multi-softmax paper: does the hypothesis' script match
    the script of the utterance's language?

    ``script_for_lang`` maps each language to a :data:`SCRIPTS` name, e.g.
    ``{"en-IN": "Latin", "hi-IN": "Devanagari", "ta-IN": "Tamil", "gu-IN": "Gujarati"}``.
    A hypothesis with no letters counts as wrong. In the confusion counts a wrong script is
    reported as the language written in that script when exactly one language of
    ``script_for_lang`` uses it, else as ``"script:<Name>"``.
    """
    if isinstance(hyps, str):
        raise TypeError("hyps must be a list of transcripts, not a single string")
    if len(hyps) != len(true_langs):
        raise DataError(f"{len(hyps)} hypotheses but {len(true_langs)} true languages")
    unknown_scripts = sorted(set(script_for_lang.values()) - SCRIPTS)
    if unknown_scripts:
        raise DataError(f"unknown script name(s) {unknown_scripts} in script_for_lang; "
                        f"known scripts: {sorted(SCRIPTS)}")
    langs_of_script: dict[str, list[str]] = {}
    for lang, script in script_for_lang.items():
        langs_of_script.setdefault(script, []).append(lang)
    preds: list[str | None] = []
    for i, (hyp, lang) in enumerate(zip(hyps, true_langs)):
        if lang not in script_for_lang:
            raise DataError(f"utterance #{i}: language {lang!r} has no script in script_for_lang "
                            f"(known: {sorted(script_for_lang)}); add it")
        script = script_of(hyp)
        if script == script_for_lang[lang]:
            preds.append(lang)
        elif script is None:
            preds.append(None)
        elif len(langs_of_script.get(script, [])) == 1:
            preds.append(langs_of_script[script][0])
        else:
            preds.append(f"script:{script}")
    return lid_accuracy(true_langs, preds)


def utterance_lid_accuracy(lid_logits, lengths, language_ids) -> float:
    """Fraction of utterances whose frame-averaged LID posteriors pick the true language.

    lid_logits (B,T,L) per-frame language logits, lengths (B,) real frames per row,
    language_ids (B,) the true language ids. Padding frames do not count; this is the decision
    rule of LID-free decoding (Section 4.2 of the multi-softmax paper), on a whole batch.
    """
    from speechlab.nn.mask import lengths_to_mask

    mask = lengths_to_mask(lengths, lid_logits.shape[1], device=lid_logits.device)
    posteriors = (lid_logits.detach().softmax(-1) * mask[..., None].to(lid_logits.dtype)).sum(1)
    return float((posteriors.argmax(-1) == language_ids.to(posteriors.device)).float().mean())
