"""The data every paper's reproduction starts from: its corpus directory and its LM text.

- :func:`corpus_dir`: the corpus a run reads: the user's (``--corpus``), or the embedded one,
  built into the run directory by the main process the first time.
- :func:`asr_manifests`: an ASR corpus's three cut manifests, every one checked before any
  work is done.
- :func:`held_out_lm_text`: a language's harvested sentences, normalized, with every dev and
  test sentence left out (the LM must never see what it is evaluated on).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from speechlab.errors import DataError

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
EMBEDDED = "corpus"


def corpus_dir(out: Path, given: Path | None, build: Callable[[Path], object], *,
               write: bool, what: str = "corpus") -> Path:
    """``given`` if there is one; else ``out/corpus``, which ``build(dir)`` makes when it has no
    ``corpus.json`` yet and this process may ``write`` (a worker or DDP rank > 0 only reads what
    the main process built)."""
    if given is not None:
        return given
    path = out / EMBEDDED
    if write and not (path / "corpus.json").exists():
        log.info("building the embedded %s in %s", what, path)
        build(path)
    return path


def asr_manifests(corpus: Path, splits: Iterable[str] = SPLITS,
                  optional: Iterable[str] = ()) -> dict[str, Path]:
    """``{split: corpus/<split>_cuts.jsonl.gz}``, every one of ``splits`` present (else one
    error naming the first missing file), and those of ``optional`` that are (the unseen-voice
    split, which a corpus brought by a user may lack)."""
    paths = {split: corpus / f"{split}_cuts.jsonl.gz" for split in splits}
    for path in paths.values():
        if not path.exists():
            raise DataError(f"{path} is missing: a corpus dir needs train/dev/test cut manifests")
    for split in optional:
        path = corpus / f"{split}_cuts.jsonl.gz"
        if path.exists():
            paths[split] = path
    return paths


def held_out_lm_text(language: str, held_out: Iterable[str], cache_dir: Path | None = None
                     ) -> list[str]:
    """The harvested sentences of ``language`` (:mod:`speechlab.data.text_harvest`), normalized
    as transcripts are, minus every sentence of ``held_out`` (dev and test transcripts),
    compared case- and punctuation-blind."""
    from speechlab.data.text_harvest import harvest_sentences
    from speechlab.text.normalize import normalize_text, sentence_key

    banned = {sentence_key(t) for t in held_out}
    harvested = harvest_sentences([language], cache_dir).get(language, [])
    return [normalize_text(s.text, language) for s in harvested
            if sentence_key(s.text) not in banned]
