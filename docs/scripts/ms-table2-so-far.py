"""Table 2 of a multi-softmax run so far: the rows whose models are trained and decoded.

A long run (the converged scale) writes its report only when every job is done; the models of
Table 2 (language known) are trained and decoded early (the plan runs them first) and their
decodings are kept in ``RUN/decoded/``. This prints Table 2's WER and CER tables, as the report
does (``speechlab.papers.multisoftmax.tables``: word-weighted average, WERR/CERR against Monolingual with
the paired-bootstrap 95% interval), for the rows whose decodings are kept: Monolingual (all
four languages' models) and each multilingual model trained from scratch.

    python docs/scripts/ms-table2-so-far.py RUN [--markdown FILE]

Run it with the code that made the run (a kept decoding is found by a key that names its job
as that code writes it): for a run from a frozen checkout, ``PYTHONPATH=CHECKOUT/src``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _table_cli import arguments, emit

from speechlab.config import load_config
from speechlab.experiment.decoded import DIR_NAME, decoding_key, load_decoded
from speechlab.experiment.scoring import error_rate_table, merge

try:
    from speechlab.papers import get_paper
except ImportError:  # a checkout from before the registry moved above the papers
    from speechlab.experiment.papers import get_paper

COLUMNS = {"en": "En-IN", "hi": "Hi-IN", "ta": "Ta-IN", "gu": "Gu-IN"}
# Table 2's multilingual rows: the decode jobs of the models trained from scratch, by name
ROWS = [("Multilingual Vanilla", "vanilla"), ("Multilingual Onehot", "onehot"),
        ("Multi-softmax", "multisoftmax"), ("Multi-softmax LSP", "multisoftmax_lsp")]


def kept(run: Path, job) -> object | None:
    """The decoding of ``job`` kept in ``run``, or None (not decoded yet, or decoded from
    another model or recipe)."""
    model = job.model if isinstance(job.model, str) else job.model.name  # older jobs: a name
    key = decoding_key(job, run / "config.yaml", run / "models" / model)
    found, value = load_decoded(run / DIR_NAME / f"{job.name}.pt", key)
    return value if found else None


def main(argv: list[str] | None = None) -> int:
    a = arguments(__doc__, "the run directory (speechlab reproduce ... --out)", argv)
    config = a.run / "config.yaml"
    paper = get_paper("multisoftmax")
    plan = paper.plan(load_config(paper.config_class, config))
    decodes = {j.name: j for j in plan if type(j).__name__ == "DecodeJob"}
    mono = [j for name, j in decodes.items() if name.startswith("mono_")]
    languages = [j.name.removeprefix("mono_") for j in mono]
    mono_kept = [kept(a.run, j) for j in mono]
    missing = [j.name for j, d in zip(mono, mono_kept) if d is None]
    if missing:
        print(f"{a.run}: the monolingual decodings {missing} are not kept yet; Table 2 "
              "compares with them", file=sys.stderr)
        return 2
    rows = [("Monolingual", merge(mono_kept))]
    waiting = []
    for name, job in ROWS:
        value = kept(a.run, decodes[job]) if job in decodes else None
        if value is None:
            waiting.append(name)
        else:
            rows.append((name, value))
    names = {"column_names": COLUMNS}
    tables = [
        error_rate_table("table2", "WER[%] with the input language known (Table 2), the rows "
                         "decoded so far. Avg. is word-weighted; WERR relative to "
                         "Monolingual.", rows, languages, **names),
        error_rate_table("table2_cer", "CER[%] of the same systems (CERR: relative reduction "
                         "vs. Monolingual).", rows, languages, unit="chars", **names),
    ]
    text = "\n\n".join(t.to_markdown() for t in tables)
    if waiting:
        text += "\n\nNot decoded yet: " + ", ".join(waiting) + "."
    return emit(text + "\n", a.markdown)


if __name__ == "__main__":
    raise SystemExit(main())
