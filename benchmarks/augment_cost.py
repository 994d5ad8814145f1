"""What on-the-fly augmentation costs against the training step it feeds.

Builds a few minutes of the varied corpus, then times, on batches of ``--max-frames`` frames
drawn as training draws them:

* a training step of the shipped CTC recipe's model (``small`` preset, S1-T1 graph loss,
  forward + backward + optimizer update), one thread;
* making the same batch's features afresh through :class:`speechlab.asr.data.WaveAugment`
  with the shipped recipe's effects (speed, rooms, noise and babble, lines, gain, and vocal
  tract length perturbation of the features), one thread.

Prints both medians and their ratio; the target is augmentation <= 20% of a step.

    python benchmarks/augment_cost.py [--batches 12] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

TARGET = 0.20


def main(argv: list[str] | None = None) -> int:
    from lhotse import CutSet

    from speechlab.asr.ctc.model import build, preset
    from speechlab.asr.ctc.phones import PhoneTokenizer, lexicon_for
    from speechlab.asr.ctc.task import CtcTask, CtcTaskConfig
    from speechlab.asr.ctc.topology import num_tokens
    from speechlab.asr.data import WaveAugment, load_utterances
    from speechlab.experiment.recipes import load_recipe
    from speechlab.papers.topologies.recipe import TopologiesConfig
    from speechlab.audio.features import FbankConfig, compute_features, fit_cmvn
    from speechlab.data.corpus import CorpusConfig, make_asr_corpus
    from speechlab.text.normalize import normalize_text

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=12)
    p.add_argument("--max-frames", type=int, default=2000)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    # The shipped recipe's effects (src/speechlab/recipes/topologies/shipped.yaml), with vocal
    # tract length perturbation on every utterance if the recipe has none (its cost counted).
    plan = load_recipe(TopologiesConfig, "topologies", "shipped").task.augment
    if plan.vtlp_prob == 0:
        plan = dataclasses.replace(plan, vtlp_prob=1.0)
    print("effects:", ", ".join(f"{k} {v}" for k, v in vars(plan).items()
                                if k.endswith("_prob") and v > 0))
    with tempfile.TemporaryDirectory(prefix="augment-cost-") as tmp:
        corpus = make_asr_corpus(CorpusConfig(minutes={"en": 4.0}, unseen_voices={}),
                                 Path(tmp) / "corpus", progress=False)
        cuts = compute_features(CutSet.from_file(corpus / "train_cuts.jsonl.gz"),
                                Path(tmp) / "fbank", FbankConfig(), progress=False)
        cmvn = fit_cmvn(cuts, progress=False)
        words = sorted({w for c in cuts for w in normalize_text(c.supervisions[0].text,
                                                                "en").split()})
        tok = PhoneTokenizer(lexicon_for("en", words), "en")
        utts, _ = load_utterances(cuts, {"en": tok}, cmvn, min_frames=7, keep_audio=True)
    model = build(preset("small", num_tokens("S1-T1", tok.num_phones), subsampling=2,
                         topology="S1-T1", language="en"))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    cfg = CtcTaskConfig(max_frames=args.max_frames, spec_augment=True, augment=plan)
    augment = WaveAugment(plan, cmvn)
    task = CtcTask("S1-T1", utts, utts[:4], cfg, augment=augment)
    plain = CtcTask("S1-T1", utts, utts[:4], CtcTaskConfig(max_frames=args.max_frames))
    torch.manual_seed(0)
    batches = iter(plain.batches())
    step_s, aug_s, frames = [], [], []
    by_id = {u.id: u for u in utts}
    for i in range(args.batches + 1):
        batch = next(batches)
        members = [by_id[j] for j in batch.ids]
        t0 = time.perf_counter()
        augment.features(members)
        t1 = time.perf_counter()
        loss, _, _ = task.loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t2 = time.perf_counter()
        if i:  # the first of each is a warm-up
            aug_s.append(t1 - t0)
            step_s.append(t2 - t1)
            frames.append(int(batch.x_lens.sum()))
    step, aug = statistics.median(step_s), statistics.median(aug_s)
    ratio = aug / step
    print(f"batches of up to {args.max_frames} frames (median {statistics.median(frames):.0f} "
          f"speech frames), one thread:")
    print(f"  training step (small CTC, S1-T1): {1000 * step:8.1f} ms")
    print(f"  on-the-fly augmentation + fbank:  {1000 * aug:8.1f} ms  "
          f"({100 * ratio:.1f}% of a step; target <= {100 * TARGET:.0f}%)")
    if args.json:
        args.json.write_text(json.dumps({"step_ms": round(1000 * step, 1),
                                         "augment_ms": round(1000 * aug, 1),
                                         "ratio": round(ratio, 3)}, indent=2) + "\n")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
