"""Table 1 over seeds: the LMSAB variants against Orig, fine-tuned once per seed from one
pre-trained model (``docs/scripts/lmsab-seeds.sh``: one run directory ``OUT/s<seed>`` per seed).

For each model and decoding: the test WER of every seed, their mean, and the WER reduction
against Orig with its 95% interval from a paired bootstrap over the test utterances of the
seeds pooled (``speechlab.metrics.pool_runs``: each utterance carries every seed's errors on
it), with the probability that the variant makes fewer errors, and the reduction seed by
seed (against Orig of the same seed: the same batches and masks); the same for CER. The pooled
interval counts the utterances' variation, not the seeds': the per-seed column shows the
latter. Read from
the hypotheses each run keeps (``RUN/hyps/<model>_<decoding>.txt``, ``RUN/hyps/ref.txt``) and
the blocks each run's Table 1 names (``RUN/results.json``); seeds still running are left out.

    python docs/scripts/lmsab-seeds-table.py OUT [--markdown FILE]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from _table_cli import arguments, emit

from speechlab.metrics import cer, paired_bootstrap, pool_runs, wer, werr, werr_interval
from speechlab.report.results import Results


def read_texts(path: Path) -> dict[str, str]:
    """``id text`` lines -> {id: text}."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        utt, _, text = line.partition(" ")
        out[utt] = text.strip()
    return out


def finished_runs(out: Path) -> list[tuple[int, Path]]:
    runs = []
    for d in sorted(out.glob("s*")):
        m = re.fullmatch(r"s(\d+)", d.name)
        if m and (d / "results.json").is_file() and (d / "hyps" / "ref.txt").is_file():
            runs.append((int(m.group(1)), d))
    return sorted(runs)


def blocks_of(run: Path) -> dict[str, str]:
    """Model -> its LMSAB blocks as the run's Table 1 names them."""
    table = next(t for t in Results.load(run).tables if t.name == "table1")
    return {row[0]: row[1] for row in table.rows if row[0]}


def main(argv: list[str] | None = None) -> int:
    a = arguments(__doc__, "the directory holding s0, s1, ... run directories", argv, run=False)
    runs = finished_runs(a.out)
    if not runs:
        print(f"{a.out}: no finished seed run (s<N>/results.json); nothing to tabulate",
              file=sys.stderr)
        return 2
    refs = read_texts(runs[0][1] / "hyps" / "ref.txt")
    ids = list(refs)
    systems = sorted({f.stem for f in (runs[0][1] / "hyps").glob("*.txt")} - {"ref"})
    blocks = blocks_of(runs[0][1])

    def scored(run: Path, system: str):
        hyps = read_texts(run / "hyps" / f"{system}.txt")
        h = [hyps.get(i, "") for i in ids]
        r = [refs[i] for i in ids]
        return wer(r, h, ids=ids), cer(r, h, ids=ids)

    per_seed = {s: [scored(run, s) for _, run in runs] for s in systems}
    seeds = [seed for seed, _ in runs]
    header = (["Model", "LMSAB blocks", "Decoding"] + [f"WER s{s}" for s in seeds]
              + ["WER pooled", "WERR vs Orig [95%]", "P(better)", "WERR per seed",
                 "CER pooled", "CERR vs Orig [95%]"])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

    def order(system: str) -> tuple:
        model, _, decoding = system.rpartition("_")
        return (model != "Orig", list(blocks).index(model) if model in blocks else 99,
                decoding != "viterbi", decoding)

    for system in sorted(systems, key=order):
        model, _, decoding = system.rpartition("_")
        w = pool_runs([x[0] for x in per_seed[system]])
        c = pool_runs([x[1] for x in per_seed[system]])
        row = [model, blocks.get(model, "?"), decoding]
        row += [f"{100 * x[0].wer:.1f}" for x in per_seed[system]]
        row += [f"{100 * w.wer:.2f}"]
        base = f"Orig_{decoding}"
        if model == "Orig" or base not in per_seed:
            row += ["", "", "", f"{100 * c.wer:.2f}", ""]
        else:
            bw = pool_runs([x[0] for x in per_seed[base]])
            bc = pool_runs([x[1] for x in per_seed[base]])
            lo, hi = werr_interval(bw, w)
            clo, chi = werr_interval(bc, c)
            row += [f"{werr(bw.wer, w.wer):+.1f}% [{lo:+.1f}, {hi:+.1f}]",
                    f"{paired_bootstrap(bw, w).prob_improvement:.2f}",
                    ", ".join(f"{werr(b[0].wer, x[0].wer):+.1f}"
                              for b, x in zip(per_seed[base], per_seed[system])),
                    f"{100 * c.wer:.2f}", f"{werr(bc.wer, c.wer):+.1f}% [{clo:+.1f}, {chi:+.1f}]"]
        lines.append("| " + " | ".join(row) + " |")
    text = "\n".join(lines) + (
        f"\n\n{len(ids)} test utterances, {sum(len(t.split()) for t in refs.values())} words; "
        f"seeds {', '.join(map(str, seeds))}; intervals: paired bootstrap over the utterances "
        "of the seeds pooled (1000 replicates)\n")
    return emit(text, a.markdown)


if __name__ == "__main__":
    raise SystemExit(main())
