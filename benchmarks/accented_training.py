"""Does accented English in training help a recognizer hear a voice it never heard? Two
continuations of one trained model for the same number of updates: on its run's corpus (the
control) and on that corpus with accented English added to its training split (festival's
Czech, Finnish and Italian speakers reading the split's own English sentences, respelt in their
spelling: ``speechlab.text.respell``); then each decoded by ``speechlab decode`` on the run's
test split (the voices of training) and unseen split (a voice no training utterance has).

Each arm starts from the model's newest checkpoint as a continued run: its optimizer, schedule
and weights' average go on; early stopping starts afresh; the batch order starts a new epoch
(the accented arm has more utterances). Dev and test are the run's, unchanged, so the dev
losses compare too. With ``--accented`` the arms are also read by the accented voices
(``benchmarks/accented_english.py``), those not added to training being accents neither arm
heard.

    python benchmarks/accented_training.py --run exp/shipped-topologies --model en_S3-T2s \\
        --out exp/accented [--families en-dita,en-machac,en-ph] [--per-family 70] \\
        [--updates 750] [--scale shipped] [--accented 60]

Resumable: a finished step (the corpus, an arm's training, its decoding) is not redone.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

ACCENTED = ("en-dita", "en-machac", "en-ph", "en-lj", "en-mv", "en-lp", "en-pc")
ARMS = ("control", "accented")


def _lines(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def extend_corpus(src: Path, out: Path, families: list[str], per_family: int,
                  language: str = "en", seed: int = 0) -> int:
    """``out``: ``src`` with ``per_family`` of its ``language`` training sentences read by each
    accented family added to its training split; returns the number added."""
    import numpy as np
    import soundfile as sf

    from speechlab.data.corpus import BASE_VOICES
    from speechlab.data.synth import SynthRequest, synthesize_batch
    from speechlab.files import atomic_path

    done = out / "added.json"
    if done.is_file():
        return json.loads(done.read_text())["added"]
    cuts = _lines(src / "train_cuts.jsonl.gz")
    pool = [c for c in cuts if c["supervisions"][0]["language"] == language]
    random.Random(seed).shuffle(pool)
    if per_family * len(families) > len(pool):
        raise SystemExit(f"accented_training: {len(pool)} {language} training sentences, "
                         f"fewer than {per_family} x {len(families)}")
    wav_dir = out / "wav" / "train" / language
    wav_dir.mkdir(parents=True, exist_ok=True)
    added = []
    for k, family in enumerate(families):
        base = BASE_VOICES[family]
        chosen = pool[k * per_family:(k + 1) * per_family]
        reqs = [SynthRequest(text=c["supervisions"][0]["text"], voice=base.voice,
                             engine=base.engine, accent=base.accent) for c in chosen]
        for c, audio in zip(chosen, synthesize_batch(reqs)):
            if len(audio) == 0:
                continue  # festival could not speak it
            uid = f"{language}-train-{family}-{len(added):05d}"
            path = wav_dir / f"{uid}.wav"
            sf.write(path, audio, 16000, subtype="PCM_16")
            d = len(audio) / 16000
            new = json.loads(json.dumps(c))
            new.update(id=uid, duration=d)
            sup = new["supervisions"][0]
            sup.update(id=uid, recording_id=uid, duration=d, speaker=family,
                       custom={"voice": base.voice, "engine": base.engine,
                               "accent": base.accent, "effects": []})
            new["recording"].update(id=uid, num_samples=int(len(audio)), duration=d)
            new["recording"]["sources"][0]["source"] = str(path.resolve())
            added.append(new)
        print(f"{family}: {len(chosen)} sentences", file=sys.stderr)
    for p in src.glob("*.jsonl.gz"):
        if p.name != "train_cuts.jsonl.gz":
            shutil.copyfile(p, out / p.name)
    shutil.copyfile(src / "corpus.json", out / "corpus.json")
    with atomic_path(out / "train_cuts.jsonl.gz") as tmp:
        with gzip.open(tmp, "wt", encoding="utf-8") as f:
            for c in cuts + added:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
    seconds = float(np.sum([c["duration"] for c in added]))
    done.write_text(json.dumps({"added": len(added), "seconds": round(seconds, 1),
                                "families": families, "per_family": per_family}) + "\n")
    return len(added)


def seed_arm(run: Path, model: str, arm_dir: Path, extra_items: int) -> int:
    """``arm_dir``: a run holding ``model``'s newest checkpoint of ``run`` as a continued run
    (early stopping afresh, a new epoch of ``extra_items`` more utterances); its step."""
    from speechlab.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint

    src = run / "models" / model
    latest = latest_checkpoint(src)
    if latest is None:
        raise SystemExit(f"accented_training: no checkpoint in {src}")
    ckpt = load_checkpoint(latest)
    step = int(ckpt["step"])
    dst = arm_dir / "models" / model
    if latest_checkpoint(dst) is not None:
        return step
    dst.mkdir(parents=True, exist_ok=True)
    ckpt["trainer"].update(stopped=False, bad_validations=0, best_metric=float("inf"),
                           best_step=None)
    ckpt["batches"] = [{**b, "epoch": int(b["epoch"]) + 1, "position": 0,
                        "num_items": int(b["num_items"]) + extra_items}
                       for b in ckpt["batches"]]
    shutil.copyfile(src / "train.yaml", dst / "train.yaml")
    for sub in ("lang", "graphs"):  # the run's lexicon, LM and decoding graphs: not remade
        if (run / sub).is_dir() and not (arm_dir / sub).exists():
            shutil.copytree(run / sub, arm_dir / sub)
    save_checkpoint(dst / latest.name,
                    **{k: v for k, v in ckpt.items() if k != "format_version"})
    return step


_RESULT = re.compile(r"test WER ([\d.]+)%, unseen-voice WER ([\d.]+)%")


def run_arm(paper: str, model: str, scale: str, arm_dir: Path, corpus: Path,
            max_steps: int) -> dict:
    exe = [sys.executable, "-m", "speechlab"]
    common = ["--scale", scale, "--out", str(arm_dir), "--corpus", str(corpus)]
    log = arm_dir / "log.txt"
    with open(log, "a", encoding="utf-8") as f:
        subprocess.run([*exe, "train", paper, model, *common,
                        "--set", f"train.max_steps={max_steps}"], check=True, stdout=f,
                       stderr=subprocess.STDOUT)
        out = subprocess.run([*exe, "decode", paper, model, *common], check=True,
                             capture_output=True, text=True)
        f.write(out.stdout + out.stderr)
    m = _RESULT.search(out.stdout + out.stderr)
    rows = [json.loads(x) for x in (arm_dir / "models" / model / "log.jsonl").read_text()
            .splitlines() if x.strip()]
    valid = [r for r in rows if r.get("kind") == "valid"]
    return {"test": float(m.group(1)) if m else None,
            "unseen": float(m.group(2)) if m else None,
            "dev loss": [(r["step"], round(r["loss"], 2)) for r in valid]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="the trained run (RUN/corpus, "
                    "RUN/models/MODEL)")
    ap.add_argument("--model", required=True, help="an English model of the run, e.g. "
                    "en_S3-T2s")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--paper", default="topologies")
    ap.add_argument("--scale", default="shipped", help="the run's recipe scale")
    ap.add_argument("--families", default="en-dita,en-machac,en-ph",
                    help=f"accented families added (of {','.join(ACCENTED)})")
    ap.add_argument("--per-family", type=int, default=70)
    ap.add_argument("--updates", type=int, default=750)
    ap.add_argument("--accented", type=int, default=0, metavar="N",
                    help="also read both arms with every accented voice on N test sentences")
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    if not families or set(families) - set(ACCENTED):
        print(f"accented_training: --families takes some of {', '.join(ACCENTED)}",
              file=sys.stderr)
        return 2
    if not (args.run / "models" / args.model).is_dir():
        print(f"accented_training: no model {args.model} in {args.run}/models", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = {"control": args.run / "corpus", "accented": args.out / "corpus-accented"}
    added = extend_corpus(args.run / "corpus", corpus["accented"], families, args.per_family)
    results = {}
    for arm in ARMS:
        step = seed_arm(args.run, args.model, args.out / arm,
                        added if arm == "accented" else 0)
        results[arm] = run_arm(args.paper, args.model, args.scale, args.out / arm,
                               corpus[arm], step + args.updates)
        print(f"{arm}: {json.dumps(results[arm])}", file=sys.stderr)
    if args.accented:
        sys.path.insert(0, str(Path(__file__).parent))
        import accented_english

        rows = accented_english.measure(
            [str(args.out / arm / "models" / args.model) for arm in ARMS],
            args.run / "corpus", args.accented, list(ACCENTED))
        for arm, row in zip(ARMS, rows):
            results[arm]["accented"] = {k: v for k, v in row.items() if k != "model"}
    print(f"{added} accented utterances ({', '.join(families)}) added; "
          f"{args.updates} updates each")
    print("| arm | best dev loss | test WER | unseen WER |")
    print("|---|---:|---:|---:|")
    for arm, r in results.items():
        best = min((loss for _, loss in r["dev loss"]), default=None)
        print(f"| {arm} | {best} | {r['test']} | {r['unseen']} |")
    if args.accented:
        print()
        print(accented_english.markdown(
            [{"model": arm, **results[arm]["accented"]} for arm in ARMS], list(ACCENTED)))
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
