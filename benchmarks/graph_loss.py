"""Benchmark of the graph loss of the CTC-topologies paper: forward + backward time and peak
extra memory on CPU, every topology against ``torch.nn.functional.ctc_loss``.

Run:  python benchmarks/graph_loss.py [--repeats N] [--threads N] [--no-peaky]

At each (B, T, V, U) shape, V is ctc_loss's vocabulary (blank + V-1 labels); topology Sx-Ty
then has P = V-1 phones and 1 + P x outputs, so S1-T1 computes exactly what ctc_loss does
(eq. 6; the tests check values and gradients), and the others are bigger problems on the
same phones.  Inputs: float32 log_softmax of Gaussian logits, full-length utterances,
random targets; the step is ``loss.sum().backward()`` (the denominator on).  Targets: S1-T1
within 1.5x of ctc_loss's time, every topology within 3x.

The reference is ctc_loss at its faster setting: it is timed with --threads torch threads and
with one, and the ratios divide by the smaller median.  (With two threads on a machine whose
cores are busy with other work, torch's OpenMP threads spin against each other: measured
32 ms per call at (8, 300, 50, 40) against 7 ms on one thread.  Dividing by that would
flatter the graph loss.)  The graph loss always runs with --threads threads.

Table 2 (skip with --no-peaky) repeats the shapes with trained-model-like emissions
(logits x 8, blank favoured): tokens then sit tens of nats apart within a frame, and the
denominator's probability-domain pass must still hold (it gives up beyond ~200 nats per
frame).  Memory is what the step adds on top of its inputs (the log_probs), see ``_common``.
"""

from __future__ import annotations

import argparse

import torch

from _common import Measurement, format_table, measure

SHAPES = [(8, 300, 50, 40), (16, 600, 80, 100)]
TINY = (2, 12, 5, 3)  # warm-up shape (compiles/loads the numba kernels)
SEED = 0
#: Time targets against ctc_loss: S1-T1 1.5x, the other topologies 3x.
TARGET = {"S1-T1": 1.5}
OTHER_TARGET = 3.0


def _topologies() -> list[str]:
    from speechlab.asr.ctc.topology import TOPOLOGIES

    return list(TOPOLOGIES)


def _inputs(shape, x: int, peaky: bool):
    """log_probs (B, T, 1 + (V-1) x) leaf, targets (B, U) phones 1..V-1, lengths."""
    batch, frames, vocab, labels = shape
    gen = torch.Generator().manual_seed(SEED)
    logits = torch.randn(batch, frames, 1 + (vocab - 1) * x, generator=gen)
    if peaky:
        logits = logits * 8.0
        logits[..., 0] += 8.0  # blank most of the time, like a trained CTC model
    log_probs = logits.log_softmax(-1).requires_grad_(True)
    targets = torch.randint(1, vocab, (batch, labels), generator=gen)
    return log_probs, targets, torch.full((batch,), frames), torch.full((batch,), labels)


def make_ctc(shape, peaky=False):
    import torch.nn.functional as F

    log_probs, targets, frames, labels = _inputs(shape, 1, peaky)

    def step():
        log_probs.grad = None
        F.ctc_loss(log_probs.transpose(0, 1), targets, frames, labels,
                   reduction="none").sum().backward()

    return step


def make_graph(shape, name, peaky=False):
    from speechlab.asr.ctc.loss import graph_loss
    from speechlab.asr.ctc.topology import get

    log_probs, targets, frames, labels = _inputs(shape, get(name).states, peaky)

    def step():
        log_probs.grad = None
        graph_loss(log_probs, frames, targets, labels, topology=name).sum().backward()

    return step


def setup_ctc(shape, peaky):
    make_ctc(TINY)()
    return make_ctc(shape, peaky)


def setup_graph(shape, name, peaky):
    make_graph(TINY, name)()
    return make_graph(shape, name, peaky)


def check_agreement() -> float:
    """Largest relative difference of S1-T1 vs ctc_loss per utterance (sanity)."""
    import torch.nn.functional as F

    from speechlab.asr.ctc.loss import graph_loss

    log_probs, targets, frames, labels = _inputs((4, 60, 20, 15), 1, False)
    frames = torch.tensor([60, 51, 33, 40])
    labels = torch.tensor([15, 9, 15, 0])
    ours = graph_loss(log_probs, frames, targets, labels)
    ref = F.ctc_loss(log_probs.transpose(0, 1), targets, frames, labels, reduction="none")
    return ((ours - ref).abs() / ref.abs().clamp(min=1e-6)).max().item()


def _table(shapes, peaky: bool, repeats: int, threads: int, measured: list) -> str:
    rows = []
    for shape in shapes:
        refs = {n: measure(setup_ctc, shape, peaky, repeats=repeats, threads=n)
                for n in sorted({threads, 1}, reverse=True)}
        measured.extend(refs.values())
        ref = min(refs.values(), key=lambda m: m.median_ms)
        for n, m in refs.items():
            rows.append([str(shape) if n == threads else "", f"ctc_loss, {n} thr",
                         f"{m.median_ms:.1f} ({m.min_ms:.1f})", m.peak_extra_mb,
                         m.rss_default_mb, f"{m.median_ms / ref.median_ms:.2f}x",
                         f"{m.peak_extra_mb / max(ref.peak_extra_mb, 1e-3):.2f}",
                         "reference" if m is ref else ""])
        for name in _topologies():
            m: Measurement = measure(setup_graph, shape, name, peaky, repeats=repeats,
                                     threads=threads)
            measured.append(m)
            ratio = m.median_ms / ref.median_ms
            target = TARGET.get(name, OTHER_TARGET)
            rows.append([
                "", name, f"{m.median_ms:.1f} ({m.min_ms:.1f})", m.peak_extra_mb,
                m.rss_default_mb, f"{ratio:.2f}x",
                f"{m.peak_extra_mb / max(ref.peak_extra_mb, 1e-3):.2f}",
                f"<= {target:g}x {'ok' if ratio <= target else 'MISSED'}",
            ])
    return format_table(
        ["(B, T, V, U)", "method", "time ms", "mem MB", "rss MB", "time / ctc", "mem / ctc",
         "target"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per measurement")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (and ours)")
    parser.add_argument("--no-peaky", action="store_true", help="skip table 2")
    args = parser.parse_args()

    print(f"S1-T1 vs ctc_loss, largest relative difference of the loss: {check_agreement():.1e}")
    print(
        f"threads={args.threads}, repeats={args.repeats}; time = median (min) ms of forward + "
        "backward; mem = peak extra live MB of one call, rss = the same with glibc's default "
        "allocator settings (see benchmarks/_common.py); ratios against the ctc_loss row "
        "marked reference (the faster of its two thread settings)"
    )
    measured: list[Measurement] = []
    print()
    print("Table 1: Gaussian logits; topology x has P = V-1 phones and 1 + P x outputs")
    print(_table(SHAPES, False, args.repeats, args.threads, measured))
    if not args.no_peaky:
        print()
        print("Table 2: peaky emissions (logits x 8, blank +8)")
        print(_table(SHAPES, True, args.repeats, args.threads, measured))
    if not all(m.exact_peak for m in measured):
        print("note: /proc/self/clear_refs not writable; memory is the peak since process start")


if __name__ == "__main__":
    main()
