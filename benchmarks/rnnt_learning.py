"""Learning per CPU second: one multi-softmax-family model, trained and decoded on its own.

The reproduction trains seventeen models; choosing a preset, batching or LID loss for it needs
one model at a time. This trains one model of the plan (``--variant``; ``mono_<lang>`` for a
monolingual one) on the recipe ``--scale`` with ``--set`` overrides, on one thread, then decodes
``test_utterances`` per language with the language known and, for ``multisoftmax_lid``,
without it (LID-free, no early stopping), and prints per language CER / WER, the LID head's
utterance accuracy (averaged posteriors and summed log-posteriors), and the training wall-clock
and process CPU time.

    python benchmarks/rnnt_learning.py --out DIR --variant multisoftmax_lid --scale small \\
        --set preset=fast train.max_steps=800 ...

The corpus and fbank are built in ``--out`` (or taken from ``--corpus``); training resumes
from its checkpoints when run again with the same arguments. ``results.json`` in ``--out`` keeps
the numbers printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import time
from pathlib import Path

import torch

from speechlab.asr.rnnt.config import EarlyStopConfig
from speechlab.asr.rnnt.model import build, load
from speechlab.asr.rnnt.training import train_model
from speechlab.config import load_config
from speechlab.experiment.recipes import recipe_path
from speechlab.files import atomic_write_json
from speechlab.metrics import lid_accuracy
from speechlab.papers.multisoftmax.decoding import decode_known, decode_without_language
from speechlab.papers.multisoftmax.recipe import MultiSoftmaxConfig, prepare_data, test_set


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _rates(scored) -> dict[str, dict[str, float]]:
    return {lang: {"cer": round(100 * scored.chars[lang].wer, 2), "wer": round(100 * e.wer, 2)}
            for lang, e in scored.words.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--variant", default="multisoftmax_lid")
    p.add_argument("--scale", default="small")
    p.add_argument("--corpus", type=Path, default=None)
    p.add_argument("--set", nargs="*", default=[], dest="overrides")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    cfg = load_config(MultiSoftmaxConfig, recipe_path("multisoftmax", args.scale), args.overrides)
    data = prepare_data(cfg, args.out, args.corpus)
    languages: tuple[str, ...] = ()
    if args.variant.startswith("mono_"):
        languages = (args.variant[len("mono_"):],)
        model = build("mono", {languages[0]: data.vocab_sizes[languages[0]]}, cfg.dims())
    else:
        model = build(args.variant, data.vocab_sizes, cfg.dims())
    run = args.out / "models" / args.variant
    wall, cpu = time.time(), _cpu_seconds()
    train_model(model, data.train, data.dev, cfg.train, cfg.task, run, languages=languages)
    wall, cpu = time.time() - wall, _cpu_seconds() - cpu
    model = load(run)
    test = [u for u in test_set(cfg, data) if not languages or u.language in languages]
    result: dict[str, object] = {
        "variant": args.variant, "scale": args.scale, "overrides": args.overrides,
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_wall_s": round(wall, 1), "train_cpu_s": round(cpu, 1),
        "known": _rates(decode_known(model, test, data.tokenizers, cfg.search))}
    if model.lid_head is not None:
        run_ = decode_without_language(model, test, data.tokenizers, cfg.search, EarlyStopConfig())
        truth = [run_.truth[u.id] for u in test]
        result["lid_free"] = _rates(run_.lid)
        result["lid_acc_posterior"] = {k: round(100 * v.accuracy, 1) for k, v in
                                       lid_accuracy(truth, [run_.picked[u.id] for u in test]).per_language.items()}
        result["lid_acc_log"] = {k: round(100 * v.accuracy, 1) for k, v in
                                 lid_accuracy(truth, [run_.picked_log[u.id] for u in test]).per_language.items()}
    atomic_write_json(args.out / f"results-{args.variant}.json", result)
    print(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
