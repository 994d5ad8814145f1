"""Training throughput per paper, and the losses' time on a GPU against their peers.

Run:  python benchmarks/train_throughput.py [--device cpu|cuda] [--precision fp32|bf16|fp16]
                                            [--steps N] [--papers ...] [--no-losses] [--json F]

Table 1: for each paper, the model of its ``small`` recipe trained by the shared trainer on
synthetic utterances of the recipe's batch shape (random features and labels: the step costs
what a real one does, the data does not matter), through the paper's own task (batching, loss,
augmentation off). Utterances and audio seconds per second of training, after one warm-up
update (numba compiles, CUDA initialises), over ``--steps`` updates:

  multisoftmax   the multi-softmax RNN-T (fast preset), 4 languages, RNN-T + CTC + LID losses
  topologies     the S1-T1 and S3-T2* CTC-like models with the graph loss
  local-attention  wav2vec 2.0 pre-training (contrastive + diversity) on waveform crops
  salad          the Big SALAD role of the small recipe, 32 x 120-frame stateful batches

``--dropout-rounds N`` (CPU): each paper's update timed with speechlab's compiled dropout
(``speechlab.nn.dropout``) and with PyTorch's, N interleaved rounds; the median ratio.

Table 2 (skip with --no-losses): the losses alone, forward + backward, median ms. On a GPU:
``rnnt_loss`` against torchaudio's CUDA ``rnnt_loss`` at ``benchmarks/rnnt_loss.py``'s shapes
(target: at most 1.5x), the S1-T1 graph loss against ``ctc_loss`` at
``benchmarks/graph_loss.py``'s shapes (target: at most 2x). On the CPU it compares the device
code path (PyTorch ops) with the numba kernels the CPU uses, to show why the CPU keeps them.

The GPU targets (issue: GPU training) are judged by ``scripts/gpu-check.sh``'s run; the CPU
figures are this machine's, for the ratio against a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from speechlab.testing.synthetic_training import PAPERS, Counting
from speechlab.train.log import read_log

RNNT_SHAPES = [(8, 150, 30, 64), (8, 150, 30, 500), (16, 300, 50, 128), (4, 500, 80, 1000)]
GRAPH_SHAPES = [(8, 300, 50, 40), (16, 600, 80, 100)]
SEED = 0


def throughput(name: str, steps: int, device: str, precision: str,
               workers: int = 0) -> dict[str, Any]:
    """Utterances and audio seconds per second over ``steps`` updates after one warm-up."""
    from speechlab.train.config import TrainConfig
    from speechlab.train.trainer import Trainer

    model, task, count = PAPERS[name]()
    counting = Counting(task, count)
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(max_steps=1, log_every=1, progress=False, precision=precision,
                          seed=SEED, loader_workers=workers)
        Trainer(model, counting, cfg, out, device=device).fit()  # warm-up, then resume
        counting.utterances, counting.seconds = 0, 0.0
        cfg = TrainConfig(max_steps=1 + steps, log_every=1, progress=False,
                          precision=precision, seed=SEED, loader_workers=workers)
        trainer = Trainer(model, counting, cfg, out, device=device)
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        trainer.fit()
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        log = [r for r in read_log(Path(out) / "log.jsonl")
               if r["kind"] == "train" and r["step"] > 1]
    # The trainer's clock per update (its log's "time" is the seconds since fit began): the
    # steady state, without the start (workers forked, checkpoint read) and the last save,
    # which a 20-update run on a GPU is otherwise dominated by.
    clock = [r["time"] for r in log]
    gaps = [b - a for a, b in zip(clock, clock[1:])]
    steady = statistics.median(gaps) if gaps else seconds / steps
    waiting = statistics.median(r["data_time"] for r in log) if log else 0.0
    return {"paper": name, "device": str(trainer.device), "precision": precision,
            "loader_workers": workers,
            "steps": steps, "seconds": round(seconds, 3),
            "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
            "utt_per_s": round(counting.utterances / seconds, 2),
            "audio_s_per_s": round(counting.seconds / seconds, 2),
            "s_per_step": round(seconds / steps, 4),
            "steady_s_per_step": round(steady, 4),
            "steady_audio_s_per_s": round(counting.seconds / steps / steady, 2),
            "data_wait_s_per_step": round(waiting, 4)}


def profile(name: str, device: str, precision: str, steps: int = 3) -> dict[str, Any]:
    """What one update of ``name`` launches (after a warm-up): operator calls and, on a GPU,
    kernels per update, and the operators that take the most time on the device (or, on the
    CPU, in total): where a GPU step's time goes when it is launch-bound."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from speechlab.train.config import TrainConfig
    from speechlab.train.trainer import Trainer

    model, task, count = PAPERS[name]()
    cuda = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(max_steps=1, log_every=1, progress=False, precision=precision,
                          seed=SEED)
        Trainer(model, task, cfg, out, device=device).fit()
        cfg = TrainConfig(max_steps=1 + steps, log_every=steps, progress=False,
                          precision=precision, seed=SEED)
        trainer = Trainer(model, task, cfg, out, device=device)
        with torch_profile(activities=activities) as prof:
            trainer.fit()
    events = prof.key_averages()

    def on_device(e: Any) -> float:
        return float(getattr(e, "self_device_time_total", 0.0) or 0.0)

    ops = [e for e in events if e.key.startswith("aten::")]
    kernels = [e for e in events if on_device(e) > 0 and not e.key.startswith(("aten::",
                                                                                  "cuda"))]
    key = on_device if cuda else (lambda e: float(e.self_cpu_time_total))
    top = sorted(ops, key=key, reverse=True)[:12]
    return {"paper": name, "device": device, "precision": precision, "updates": steps,
            "aten_calls_per_update": round(sum(e.count for e in ops) / steps),
            "kernels_per_update": round(sum(e.count for e in kernels) / steps) if cuda else None,
            "top": [{"op": e.key, "calls_per_update": round(e.count / steps, 1),
                     "ms_per_update": round(key(e) / 1000 / steps, 3)} for e in top]}


def dropout_compare(name: str, steps: int, rounds: int) -> dict[str, Any]:
    """Seconds per update (the trainer's steady clock) with speechlab's compiled CPU dropout
    (``speechlab.nn.dropout``) and with PyTorch's, ``rounds`` times each, interleaved so that
    the machine's load falls on both alike; the median of the rounds' ratios."""
    from speechlab.nn import dropout as D

    times: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for compiled in ((True, False) if r % 2 == 0 else (False, True)):
            D.COMPILED = compiled
            try:
                row = throughput(name, steps, "cpu", "fp32")
            finally:
                D.COMPILED = True
            times[compiled].append(row["steady_s_per_step"])
    ratios = [a / b for a, b in zip(times[True], times[False])]
    return {"paper": name, "compiled_s_per_step": times[True],
            "pytorch_s_per_step": times[False],
            "ratio_median": round(statistics.median(ratios), 3)}


# ------------------------------------------------------------------------------------------
# The losses alone


def _median_ms(step: Callable[[], None], device: torch.device, repeats: int) -> float:
    step()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def _batch(scores: tuple[int, ...], vocab: int, labels: int, device: torch.device,
           normalised: bool = False) -> tuple[torch.Tensor, ...]:
    """Random scores of shape ``scores`` (B, T, ...), targets (B, U) in 1..V-1, full lengths."""
    batch, frames = scores[:2]
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(*scores, generator=gen)
    x = (x.log_softmax(-1) if normalised else x).to(device).requires_grad_()
    targets = torch.randint(1, vocab, (batch, labels), generator=gen).to(device)
    return (x, targets, torch.full((batch,), frames, device=device),
            torch.full((batch,), labels, device=device))


def _with_device_path(steps: dict[str, Callable[[], None]], device: torch.device
                      ) -> dict[str, Callable[[], None]]:
    """On the CPU, ``steps["ours"]`` again on the device (PyTorch) code path."""
    if device.type == "cpu":
        from speechlab.devices import device_code

        ours = steps["ours"]

        def device_path():
            with device_code():
                ours()
        steps["device path"] = device_path
    return steps


def _with_torch_ops(steps: dict[str, Callable[[], None]], x: torch.Tensor) -> None:
    """Where ``steps["ours"]`` runs the project's CUDA kernels, the PyTorch-ops recursion
    beside it."""
    from speechlab.devices import CUDA_KERNELS_ENV, use_cuda_kernels

    if not use_cuda_kernels(x):
        return
    ours = steps["ours"]

    def torch_ops():
        os.environ[CUDA_KERNELS_ENV] = "0"
        try:
            ours()
        finally:
            del os.environ[CUDA_KERNELS_ENV]
    steps["torch ops"] = torch_ops


def rnnt_steps(shape, device: torch.device) -> dict[str, Callable[[], None]]:
    from speechlab.asr.rnnt.loss import rnnt_loss

    batch, frames, labels, vocab = shape
    logits, targets, t_lens, u_lens = _batch((batch, frames, labels + 1, vocab), vocab, labels,
                                             device)

    def ours():
        logits.grad = None
        rnnt_loss(logits, targets, t_lens, u_lens).backward()

    steps = _with_device_path({"ours": ours}, device)
    _with_torch_ops(steps, logits)
    if device.type != "cpu":
        try:
            import torchaudio.functional as taf
        except ImportError:
            return steps
        targets32, t32, u32 = targets.int(), t_lens.int(), u_lens.int()

        def torchaudio():
            logits.grad = None
            taf.rnnt_loss(logits, targets32, t32, u32, blank=0, reduction="mean").backward()
        try:  # torchaudio without its compiled loss (or without CUDA in it) is no peer
            torchaudio()
        except (AttributeError, RuntimeError) as e:
            print(f"torchaudio rnnt_loss unusable here: {e}", flush=True)
            return steps
        steps["torchaudio"] = torchaudio
    return steps


def graph_steps(shape, device: torch.device) -> dict[str, Callable[[], None]]:
    from speechlab.asr.ctc.loss import graph_loss

    batch, frames, vocab, labels = shape
    log_probs, targets, t_lens, u_lens = _batch((batch, frames, vocab), vocab, labels, device,
                                                normalised=True)

    def ours():
        log_probs.grad = None
        graph_loss(log_probs, t_lens, targets, u_lens, topology="S1-T1").sum().backward()

    def ctc():
        log_probs.grad = None
        torch.nn.functional.ctc_loss(log_probs.transpose(0, 1), targets, t_lens, u_lens,
                                     reduction="sum").backward()

    steps = _with_device_path({"ours": ours, "ctc_loss": ctc}, device)
    _with_torch_ops(steps, log_probs)
    return steps


def loss_table(device: torch.device, repeats: int) -> list[dict[str, Any]]:
    rows = []
    for kind, shapes, make, peer, target in (
            ("rnnt_loss", RNNT_SHAPES, rnnt_steps, "torchaudio", 1.5),
            ("graph_loss S1-T1", GRAPH_SHAPES, graph_steps, "ctc_loss", 2.0)):
        for shape in shapes:
            times = {name: round(_median_ms(step, device, repeats), 2)
                     for name, step in make(shape, device).items()}
            row: dict[str, Any] = {"loss": kind, "shape": list(shape), "device": str(device),
                                   "ms": times}
            if peer in times:
                row["ratio"] = round(times["ours"] / times[peer], 2)
                row["target"] = target
                row["met"] = row["ratio"] <= target
            if "device path" in times:
                row["device_path_vs_numba"] = round(times["device path"] / times["ours"], 2)
            if "torch ops" in times:
                row["torch_ops_vs_kernels"] = round(times["torch ops"] / times["ours"], 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--loader-workers", type=int, default=0,
                        help="processes that make the batches ahead (train.loader_workers)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per loss")
    parser.add_argument("--papers", nargs="*", default=list(PAPERS), choices=list(PAPERS))
    parser.add_argument("--no-losses", action="store_true")
    parser.add_argument("--profile", action="store_true",
                        help="also profile a few updates of each paper (calls, kernels, top ops)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--dropout-rounds", type=int, default=0,
                        help="on the CPU: also time each paper's update with speechlab's "
                             "compiled dropout and with PyTorch's, this many rounds each")
    args = parser.parse_args()

    from speechlab.devices import resolve

    device = resolve(args.device)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    results: dict[str, Any] = {"device": str(device), "torch": torch.__version__,
                               "gpu": torch.cuda.get_device_name(device)
                               if device.type == "cuda" else None,
                               "cpu_threads": torch.get_num_threads(), "throughput": [],
                               "losses": []}
    print(f"device {device} ({results['gpu'] or 'CPU'}), precision {args.precision}, "
          f"{args.steps} updates per paper after one warm-up", flush=True)
    for name in args.papers:
        row = throughput(name, args.steps, str(device), args.precision, args.loader_workers)
        results["throughput"].append(row)
        print(json.dumps(row), flush=True)
    if args.dropout_rounds and device.type == "cpu":
        results["dropout"] = []
        for name in args.papers:
            row = dropout_compare(name, args.steps, args.dropout_rounds)
            results["dropout"].append(row)
            print(json.dumps(row), flush=True)
    if args.profile:
        results["profile"] = []
        for name in args.papers:
            row = profile(name, str(device), args.precision)
            results["profile"].append(row)
            print(json.dumps(row), flush=True)
    if not args.no_losses:
        results["losses"] = loss_table(device, args.repeats)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
