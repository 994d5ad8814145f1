"""Streaming LID-free decoding speed of the multi-softmax LID RNN-T, with and without early stop.

Measures the real-time factor (decode CPU time / audio duration, 10 ms feature frames before
stacking) on one thread of a randomly initialised ``demo``-preset model with four languages
(the paper's vocabularies), four parallel decoders, features fed in streaming chunks. The
paper reports T_avg (Table 7) but leaves the CPU cost to future work; this prints both, so the
CPU saving can be set against the T_avg saving.

A random model's LID posteriors are nearly flat, so which decoders stop is arbitrary;
``--lid-bias`` adds a constant to one language's LID logit to mimic a confident trained LID.

    python benchmarks/rnnt_decode.py --seconds 4 --tau 10 --s-th 0.5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from speechlab.asr.rnnt import (
    PAPER_VOCAB_SIZES,
    DecodeConfig,
    EarlyStopConfig,
    SearchConfig,
    build,
    decode_lid_free,
)
from speechlab.utils import atomic_write_json, seed_everything


def fake_features(seconds: float, dim: int, seed: int) -> torch.Tensor:
    """(T, dim) features correlated over time like log-mel frames (a smoothed random walk)."""
    g = torch.Generator().manual_seed(seed)
    T = int(round(seconds * 100))
    walk = torch.randn(T, dim, generator=g).cumsum(0) * 0.2
    walk = walk - walk.mean(0)
    return walk / (walk.std(0) + 1e-5) + 0.3 * torch.randn(T, dim, generator=g)


def measure(model, feats: torch.Tensor, cfg: DecodeConfig, repeats: int) -> dict[str, object]:
    cpu, wall, result = [], [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = decode_lid_free(model, feats, cfg)
        wall.append(time.perf_counter() - start)
        cpu.append(result.cpu_seconds)
    seconds = feats.shape[0] / 100.0
    return {
        "rtf_cpu": statistics.median(cpu) / seconds,
        "rtf_wall": statistics.median(wall) / seconds,
        "t_avg": result.t_avg,
        "active_frames": result.active_frames,
        "num_frames": result.num_frames,
        "language": result.language,
    }


def run(seconds: float = 4.0, method: str = "beam", beam: int = 4, max_symbols: int = 3,
        chunk_frames: int = 32, tau: float = 10, s_th: float = 0.5, lid_bias: float = 0.0,
        repeats: int = 3, seed: int = 0) -> dict[str, object]:
    torch.set_num_threads(1)
    seed_everything(seed)
    model = build("multisoftmax_lid", PAPER_VOCAB_SIZES, "demo").eval()
    if lid_bias:
        with torch.no_grad():
            model.lid_head.bias[0] += lid_bias
    feats = fake_features(seconds, model.encoder.feature_dim, seed)
    search = SearchConfig(method, beam, max_symbols)
    decode_lid_free(model, feats[:100], DecodeConfig(search=search))  # warm-up
    base = measure(model, feats, DecodeConfig(search=search, chunk_frames=chunk_frames), repeats)
    stop = measure(model, feats, DecodeConfig(search=search, chunk_frames=chunk_frames,
                                              early_stop=EarlyStopConfig(tau, s_th)), repeats)
    return {
        "settings": {"seconds": seconds, "method": method, "beam": beam, "max_symbols": max_symbols,
                     "chunk_frames": chunk_frames, "tau": tau, "s_th": s_th, "lid_bias": lid_bias,
                     "repeats": repeats, "threads": torch.get_num_threads(), "preset": "demo",
                     "decoders": len(PAPER_VOCAB_SIZES)},
        "no_early_stop": base,
        "early_stop": stop,
        "rtf_ratio": stop["rtf_cpu"] / base["rtf_cpu"],
        "t_avg_ratio": stop["t_avg"] / base["t_avg"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--method", default="beam")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--max-symbols", type=int, default=3)
    p.add_argument("--chunk-frames", type=int, default=32, help="streaming chunk, 10 ms frames")
    p.add_argument("--tau", type=float, default=10, help="encoder frames (30 ms each)")
    p.add_argument("--s-th", type=float, default=0.5)
    p.add_argument("--lid-bias", type=float, default=0.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    a = p.parse_args(argv)
    res = run(a.seconds, a.method, a.beam, a.max_symbols, a.chunk_frames, a.tau, a.s_th,
              a.lid_bias, a.repeats, a.seed)
    base, stop = res["no_early_stop"], res["early_stop"]
    print(f"streaming LID-free decode, demo preset, 4 decoders, {a.method} (beam {a.beam}), "
          f"{a.seconds:g} s audio, chunks of {a.chunk_frames} frames, 1 thread")
    print(f"{'':<24}{'RTF (cpu)':>10}{'RTF (wall)':>11}{'T_avg':>7}  active frames")
    for name, r in (("no early stop", base), (f"tau={a.tau:g} s_th={a.s_th:g}", stop)):
        print(f"{name:<24}{r['rtf_cpu']:>10.3f}{r['rtf_wall']:>11.3f}{r['t_avg']:>7.2f}  {r['active_frames']}")
    print(f"with/without early stop: RTF x{res['rtf_ratio']:.2f}, T_avg x{res['t_avg_ratio']:.2f}")
    if a.json:
        atomic_write_json(a.json, res)
    else:
        print(json.dumps({"rtf_ratio": res["rtf_ratio"], "t_avg_ratio": res["t_avg_ratio"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
