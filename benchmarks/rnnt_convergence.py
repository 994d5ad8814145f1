"""Updates to learn: a monolingual RNN-T with and without the auxiliary CTC loss.

The multi-softmax paper trains with the RNN-T loss alone, on thousands of hours. On a few CPU
hours of the embedded corpus that loss leaves the encoder on the all-blank plateau for most of
the budget (the prediction network learns the text, the encoder little); ``task.ctc_weight``
adds a CTC loss through the joint network with the prediction network left out. This trains
the same ``demo``-preset Hindi model both ways, from the same seed and batches, two processes
of one thread each, and prints the dev CER (greedy search) every ``--eval-every`` updates.

    python benchmarks/rnnt_convergence.py [--steps 900] [--minutes 200] [--ctc-weight 0.5]

Both runs resume from their checkpoints in ``--out`` when the script is run again with the
same arguments (rows measured before are kept in ``curve.json``). Rows measured before this
file existed are not known to a resumed run: use a fresh ``--out``.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import torch

from speechlab.asr.rnnt import build
from speechlab.asr.rnnt.config import SearchConfig
from speechlab.asr.rnnt.task import RNNTTask, TaskConfig
from speechlab.config import load_config
from speechlab.experiment.recipes import load_recipe
from speechlab.files import atomic_write_json
from speechlab.papers.multisoftmax.decoding import decode_known
from speechlab.papers.multisoftmax.recipe import MultiSoftmaxConfig, prepare_data
from speechlab.processes import exit_with_parent
from speechlab.train import TrainConfig, Trainer

LANGUAGE = "hi"


def _data(args: argparse.Namespace):
    cfg = load_recipe(MultiSoftmaxConfig, "multisoftmax", "demo")
    cfg = replace(cfg, languages=(LANGUAGE,), corpus=replace(cfg.corpus, minutes={LANGUAGE: args.minutes}),
                  max_train_seconds=5.0)
    return prepare_data(cfg, args.out / "data", None)


def _train(args: argparse.Namespace, ctc_weight: float) -> list[tuple[int, float, float]]:
    """(update, dev CER %, train RNN-T loss per utterance) every ``eval_every`` updates."""
    exit_with_parent(args.parent)
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.WARNING)
    data = _data(args)
    dev = data.dev[: args.dev_utterances]
    torch.manual_seed(0)
    model = build("mono", {LANGUAGE: data.vocab_sizes[LANGUAGE]}, "demo")
    train_cfg = load_config(TrainConfig, None, [
        "grad_clip=5.0", "log_every=50", f"optim.lr={args.lr}", "schedule.name=warmup_linear",
        "schedule.warmup_steps=30", f"schedule.total_steps={args.steps}",
        "schedule.final_lr_scale=0.1", "progress=false"])
    task = RNNTTask(model, data.train, dev, TaskConfig(max_frames=4000, ctc_weight=ctc_weight), seed=0)
    run_dir = args.out / f"ctc{ctc_weight:g}"
    search = SearchConfig(method="greedy", max_symbols_per_frame=3)
    # Rows already measured (a resumed run) are read back: the model in memory after a resume
    # is the last checkpoint's, not the one an earlier row was measured on.
    curve = run_dir / "curve.json"
    done = {r[0]: r for r in json.loads(curve.read_text())} if curve.exists() else {}
    rows = []
    for stop in range(args.eval_every, args.steps + 1, args.eval_every):
        if stop in done:
            rows.append(tuple(done[stop]))
            continue
        # The trainer resumes from run_dir's last checkpoint, so this continues the same run.
        Trainer(model, task, replace(train_cfg, max_steps=stop), run_dir).fit()
        model.eval()
        with torch.no_grad():
            scored = decode_known(model, dev, data.tokenizers, search)
        loss = _last_train_loss(run_dir / "log.jsonl")
        rows.append((stop, 100 * scored.chars[LANGUAGE].wer, loss))
        atomic_write_json(curve, rows)
    return rows


def _last_train_loss(path: Path) -> float:
    lines = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    train = [r for r in lines if r.get("kind") == "train"]
    return float(train[-1]["rnnt"]) if train else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=900)
    parser.add_argument("--eval-every", type=int, default=150)
    parser.add_argument("--minutes", type=float, default=200.0, help="Hindi audio over all splits")
    parser.add_argument("--ctc-weight", type=float, default=0.5)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--dev-utterances", type=int, default=60)
    parser.add_argument("--out", type=Path, default=Path("/tmp/speechlab-bench/rnnt_convergence"))
    args = parser.parse_args()
    args.parent = os.getpid()
    start = time.time()
    data = _data(args)  # build the corpus and features once, before the two workers read them
    print(f"Hindi: {len(data.train)} training utterances ({60 * data.train_hours[LANGUAGE]:.0f} min, "
          f"at most 5 s each), {min(len(data.dev), args.dev_utterances)} dev utterances; "
          f"demo preset, {args.steps} updates of at most 40 s of audio", flush=True)
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        plain, aux = pool.map(_train, [args, args], [0.0, args.ctc_weight])
    print(f"\n{'update':>7} | {'dev CER, RNN-T only':>20} | {f'dev CER, + CTC x{args.ctc_weight:g}':>20} | "
          f"{'train RNN-T loss/utt':>22}")
    for (step, c0, l0), (_, c1, l1) in zip(plain, aux):
        print(f"{step:>7} | {c0:>19.1f}% | {c1:>19.1f}% | {l0:>10.1f} vs {l1:>8.1f}")
    print(f"\n{(time.time() - start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
