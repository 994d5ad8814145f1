"""Benchmark of local attention (LMSAB) against full attention: time and peak memory on CPU.

Run:  python benchmarks/local_attention.py [--repeats N] [--threads N] [--lengths 500 1500 3000]

At wav2vec 2.0 Base width (12 heads x 64 dims, one utterance), for T = 500, 1500, 3000 frames
(10, 30, 60 s of audio at 20 ms) it times, for training (forward + backward w.r.t. q, k, v)
and inference (forward under no_grad):

  full   ``torch.nn.functional.scaled_dot_product_attention`` (PyTorch's CPU kernel, which
         never materialises T x T);
  local  ``speechlab.ssl.wav2vec2.local_attention`` with the paper's radius 30 (the banded,
         blocked computation; ``--chunk`` sets its query block);

and prints the speed-up full/local and the memory ratio local/full, both measured in this run.
Memory is the peak extra resident memory of one call (see ``_common``); the q, k, v inputs are
allocated before and not counted.
"""

from __future__ import annotations

import argparse

import torch

from _common import format_table, measure

HEADS, DIM, RADIUS = 12, 64, 30


def setup(method: str, mode: str, T: int, chunk: int):
    import torch.nn.functional as F

    from speechlab.ssl.wav2vec2.attention import local_attention

    torch.manual_seed(0)
    train = mode == "train"

    def fn(q, k, v):
        if method == "full":
            return F.scaled_dot_product_attention(q, k, v)
        return local_attention(q, k, v, RADIUS, chunk=chunk)

    def inputs(n):
        return [torch.randn(1, HEADS, n, DIM, requires_grad=train) for _ in range(3)]

    # warm up on a short input (code pages, allocator)
    small = inputs(2 * RADIUS + 70)
    out = fn(*small)
    if train:
        out.sum().backward()
    q, k, v = inputs(T)
    g = torch.randn(1, HEADS, T, DIM)

    def step():
        if train:
            for t in (q, k, v):
                t.grad = None
            (fn(q, k, v) * g).sum().backward()
        else:
            with torch.no_grad():
                fn(q, k, v)

    return step


def main() -> None:
    from speechlab.ssl.wav2vec2.attention import DEFAULT_CHUNK

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lengths", type=int, nargs="*", default=[500, 1500, 3000])
    p.add_argument("--chunk", type=int, default=DEFAULT_CHUNK)
    args = p.parse_args()
    rows = []
    for mode in ("train", "inference"):
        for T in args.lengths:
            full = measure(setup, "full", mode, T, args.chunk, repeats=args.repeats,
                           threads=args.threads)
            local = measure(setup, "local", mode, T, args.chunk, repeats=args.repeats,
                            threads=args.threads)
            rows.append([mode, T, full.median_ms, local.median_ms,
                         full.median_ms / local.median_ms, full.peak_extra_mb,
                         local.peak_extra_mb, local.peak_extra_mb / max(full.peak_extra_mb, 1e-3)])
            print(f"{mode} T={T}: full {full.median_ms:.1f} ms, local {local.median_ms:.1f} ms",
                  flush=True)
    print(f"\nLMSAB (radius {RADIUS}, chunk {args.chunk}) vs full SDPA, 1 x {HEADS} heads x "
          f"{DIM} dims, {args.threads} thread(s), median of {args.repeats}:")
    print(format_table(["mode", "T", "full ms", "local ms", "speed-up", "full MB", "local MB",
                        "mem local/full"], rows))


if __name__ == "__main__":
    main()
