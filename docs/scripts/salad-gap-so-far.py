"""Table 2's Big pair of a SALAD run so far: the Big RNN against the Big SALAD's best checkpoint
yet, on the test set, while the SALAD still trains.

A converged run writes its report when every model has stopped improving; the Big RNN stops
long before the Big SALAD. This evaluates the Big RNN's best checkpoint and the SALAD's best
dev-MCD checkpoint so far (``RUN/models/<model>/best.pt``, the SALAD in both attention modes)
on the run's test set, as the report's Table 2 does: MCD, F0 RMSE, V/UV accuracy, and the
SALAD - RNN MCD gap with its paired 95% interval over the test utterances
(``speechlab.metrics.mean_difference_interval``).

    python docs/scripts/salad-gap-so-far.py RUN [--markdown FILE]

It runs with this checkout's code on a run made by an older one (the run's features and
checkpoints are read, nothing the run kept of its decodings), and reads the best checkpoint
the running training last wrote (it is replaced atomically).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _table_cli import arguments, emit

from speechlab.config import load_config
from speechlab.metrics import mean_difference_interval

try:
    from speechlab.papers import get_paper
except ImportError:  # a checkout from before the registry moved above the papers
    from speechlab.experiment.papers import get_paper


def best_so_far(model_dir: Path) -> tuple[int | None, float | None, int]:
    """(update of the best dev MCD, that MCD, the last update logged) from the model's log."""
    best_step, best, last = None, None, 0
    for line in (model_dir / "log.jsonl").read_text().splitlines():
        r = json.loads(line)
        last = max(last, int(r.get("step", 0)))
        if r.get("kind") == "valid" and (best is None or r["mcd"] < best):
            best_step, best = int(r["step"]), float(r["mcd"])
    return best_step, best, last


def main(argv: list[str] | None = None) -> int:
    a = arguments(__doc__, "the run directory (speechlab reproduce salad --out)", argv)
    config = a.run / "config.yaml"
    from speechlab.tts.evaluate import evaluate
    from speechlab.tts.model import load

    paper = get_paper("salad")
    cfg = load_config(paper.config_class, config)
    plan = paper.plan(cfg)
    window = {j.name: j for j in plan if type(j).__name__ == "DecodeJob"}["big_salad"].options.window
    if not (a.run / "models" / "big_rnn" / "best.pt").is_file():
        print(f"{a.run}: the Big RNN has no best checkpoint yet", file=sys.stderr)
        return 2
    salad_dir = a.run / "models" / "big_salad"
    data = paper.prepare(cfg, a.run, None, write=False)
    rnn = evaluate(load(a.run / "models" / "big_rnn"), data.test, data.norm.outputs)
    model = load(salad_dir)
    modes = {"full": evaluate(model, data.test, data.norm.outputs)}
    if window is not None:
        modes["window"] = evaluate(model, data.test, data.norm.outputs, window)
    frames = [u.num_frames for u in data.test]
    step, dev, last = best_so_far(salad_dir)
    rs = rnn.scores
    lines = ["| Model | Attention | MCD [dB] | F0 RMSE [Hz] | V/UV [%] | MCD - RNN [dB] | 95% CI |",
             "|---|---|---:|---:|---:|---:|---|",
             f"| Big RNN | - | {rs['mcd']:.2f} | {rs['f0_rmse']:.2f} | {100 * rs['vuv']:.1f} "
             "|  |  |"]
    for mode, e in modes.items():
        s = e.scores
        low, high = mean_difference_interval(rnn.mcd_sums, e.mcd_sums, frames)
        attn = "whole utterance" if mode == "full" else f"{window}-frame windows"
        lines.append(f"| Big SALAD (best so far) | {attn} | {s['mcd']:.2f} | {s['f0_rmse']:.2f} "
                     f"| {100 * s['vuv']:.1f} | {s['mcd'] - rs['mcd']:+.2f} "
                     f"| [{low:+.2f}, {high:+.2f}] |")
    text = "\n".join(lines) + (
        f"\n\n{len(data.test)} test utterances; the Big SALAD's checkpoint: best dev MCD "
        f"{dev:.3f} dB at update {step} (the log's last update: {last}).\n")
    return emit(text, a.markdown)


if __name__ == "__main__":
    raise SystemExit(main())
