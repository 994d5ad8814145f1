"""A tiny embedded corpus for other areas' tests.

``tiny_corpus(tmp_dir)`` builds :meth:`CorpusConfig.tiny` (six utterances in each of en, hi, ta,
gu: 4 train / 1 dev / 1 test) into ``tmp_dir/tiny_corpus`` in a few seconds. The harvested
sentences come from the shared text cache (``$SPEECHLAB_CACHE`` or ``~/.cache/speechlab``), so
only the very first run anywhere on the machine downloads Debian packages.
"""

from __future__ import annotations

from pathlib import Path

from speechlab.data.corpus import CorpusConfig, make_asr_corpus


def tiny_corpus(tmp_dir: str | Path, seed: int = 0) -> Path:
    """Build (or reuse, if already complete there) the tiny corpus under ``tmp_dir``.

    Returns the corpus directory, holding ``{train,dev,test}_cuts.jsonl.gz`` etc.
    """
    out = Path(tmp_dir) / f"tiny_corpus_seed{seed}"
    if not (out / "corpus.json").exists():
        make_asr_corpus(CorpusConfig.tiny(seed=seed), out, progress=False)
    return out
