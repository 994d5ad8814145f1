"""How many live streams ``speechlab serve`` keeps up with on this machine (2 cores).

Starts ``speechlab serve`` in its own process with the demo's multi-softmax LID model
(``exp/demo/multisoftmax/models/multisoftmax_lid``; without a demo run, an untrained ``demo``
preset model with a sharpened joint, as costly to decode), then, for a growing number N of
concurrent WebSocket streams, sends each one ``--seconds`` of audio in 100 ms frames at
real-time pace (streams start at random offsets within a frame) and measures:

- partial latency: for every frame, from sending it to the first partial result that covers
  it (the partial's ``seconds``);
- final latency: from sending ``done`` to the final result.

N keeps up when the p95 partial latency is at most 300 ms and every final comes within 1 s of
``done``; the largest such N is the headline. Last, a server at the default ``--max-streams``
gets four streams more than that limit: the extra ones must be refused at once with a "busy"
error and close code 1013 while the others are served.

The load generator runs in this process on the same two cores (it is light: one asyncio
loop). The machine is shared: run it when nothing else is busy, and read the numbers as a
floor.

    python benchmarks/serve_load.py [--model DIR] [--seconds 8] [--levels 1 2 4 8 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

RATE = 16000
FRAME = RATE // 10
P95_LIMIT_MS = 300.0
FINAL_LIMIT_MS = 1000.0
DEMO_MODEL = Path("exp/demo/multisoftmax/models/multisoftmax_lid")


def demo_model(work: Path) -> tuple[Path, str]:
    """The demo run's model, or an untrained one of the same size."""
    if DEMO_MODEL.is_dir():
        return DEMO_MODEL, f"the demo's model ({DEMO_MODEL})"
    from speechlab.testing.rnnt import untrained_run
    from speechlab.train.checkpoint import load_checkpoint, save_checkpoint

    run = untrained_run(work / "run", "multisoftmax_lid", preset="demo")
    path = next((run / "models" / "multisoftmax_lid").glob("ckpt-*.pt"))
    ckpt = load_checkpoint(path)
    ckpt.pop("format_version")
    for k in ckpt["model"]:  # a sharp joint emits labels, so the search has hypotheses to grow
        if k.startswith("joiner.outputs."):
            ckpt["model"][k] = ckpt["model"][k] * 8.0
    save_checkpoint(path, **ckpt)
    return run / "models" / "multisoftmax_lid", ("an untrained multisoftmax_lid of the demo "
                                                  "preset (no exp/demo run here)")


def speech_like(seconds: float, seed: int) -> np.ndarray:
    """Amplitude-modulated harmonics with noise: energy that comes and goes like speech."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    f0 = 110 + 30 * np.sin(2 * np.pi * 0.7 * t + rng.uniform(0, 6))
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    voice = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = np.clip(np.sin(2 * np.pi * 2.5 * t + rng.uniform(0, 6)), 0, None)
    x = 0.15 * voice * envelope + 0.01 * rng.standard_normal(len(t))
    return x.astype(np.float32)


class Server:
    """``speechlab serve MODEL`` in a child process on a free loopback port."""

    def __init__(self, model: Path, max_streams: int | None, workers: int | None) -> None:
        self.name = Path(model).name  # what the server calls its one model
        argv = [sys.executable, "-m", "speechlab", "serve", str(model), "--port", "0"]
        if max_streams is not None:
            argv += ["--max-streams", str(max_streams)]
        if workers is not None:
            argv += ["--workers", str(workers)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env)
        deadline = time.monotonic() + 120
        lines = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
                return
        self.proc.kill()
        raise RuntimeError("speechlab serve did not start:\n" + "".join(lines))

    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/asr?model={self.name}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@dataclass
class StreamResult:
    partial_ms: list[float] = field(default_factory=list)
    final_ms: float | None = None
    error: str | None = None
    close_code: int | None = None
    text: str = ""


async def one_stream(url: str, audio: np.ndarray, delay: float) -> StreamResult:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    loop = asyncio.get_running_loop()
    result = StreamResult()
    await asyncio.sleep(delay)
    sent: list[tuple[float, float]] = []  # (audio seconds covered, time sent)
    covered = 0
    done_at = None
    async with connect(url, compression=None, max_size=None, open_timeout=30) as ws:

        async def receive() -> None:
            nonlocal covered
            try:
                async for raw in ws:
                    now = loop.time()
                    msg = json.loads(raw)
                    if msg["type"] == "partial":
                        while covered < len(sent) and sent[covered][0] <= msg["seconds"] + 1e-6:
                            result.partial_ms.append(1000 * (now - sent[covered][1]))
                            covered += 1
                    elif msg["type"] == "final":
                        result.final_ms = 1000 * (now - done_at)
                        result.text = msg["text"]
                    else:
                        result.error = msg["message"]
            except ConnectionClosed:
                pass
            result.close_code = ws.close_code

        receiver = asyncio.create_task(receive())
        start = loop.time()
        for i in range(0, len(audio), FRAME):
            await asyncio.sleep(max(0.0, start + i / RATE - loop.time()))
            if receiver.done():  # refused or closed
                break
            try:
                await ws.send(audio[i:i + FRAME].astype("<f4").tobytes())
            except ConnectionClosed:
                break
            sent.append((min(i + FRAME, len(audio)) / RATE, loop.time()))
        if not receiver.done():
            done_at = loop.time()
            try:
                await ws.send("done")
            except ConnectionClosed:
                pass
        await receiver
    return result


async def load(url: str, streams: int, seconds: float, seed: int) -> list[StreamResult]:
    rng = random.Random(seed)
    jobs = [one_stream(url, speech_like(seconds, seed + k), rng.uniform(0, 0.1))
            for k in range(streams)]
    return await asyncio.gather(*jobs)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def summarize(n: int, results: list[StreamResult]) -> dict[str, object]:
    partial = [v for r in results for v in r.partial_ms]
    finals = [r.final_ms for r in results if r.final_ms is not None]
    failed = [r.error for r in results if r.final_ms is None]
    p95 = percentile(partial, 95)
    worst_final = max(finals) if finals else float("inf")
    ok = not failed and p95 <= P95_LIMIT_MS and worst_final <= FINAL_LIMIT_MS
    return {"streams": n, "partial_p50_ms": percentile(partial, 50), "partial_p95_ms": p95,
            "partial_max_ms": max(partial) if partial else float("nan"),
            "final_p50_ms": statistics.median(finals) if finals else float("nan"),
            "final_max_ms": worst_final, "failed": len(failed), "keeps_up": ok}


def main(argv: list[str] | None = None) -> int:
    from speechlab.serve.runtime import ServeLimits

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=None,
                   help="a streaming model (default: the demo's multisoftmax_lid)")
    p.add_argument("--seconds", type=float, default=8.0, help="audio per stream")
    p.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 6, 8, 10, 12, 16, 24, 32])
    p.add_argument("--workers", type=int, default=None, help="the server's --workers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    a = p.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        if a.model is not None:
            model, what = a.model, str(a.model)
        else:
            model, what = demo_model(Path(tmp))
        print(f"speechlab serve, {what}; {os.cpu_count()} cores; {a.seconds:g} s of audio per "
              f"stream in 100 ms frames at real-time pace", flush=True)
        print(f"{'streams':>7} {'partial p50':>12} {'p95':>8} {'max':>8} {'final p50':>10} "
              f"{'final max':>10} {'failed':>7}  keeps up (p95 <= {P95_LIMIT_MS:g} ms, final "
              f"<= {FINAL_LIMIT_MS:g} ms)", flush=True)
        rows = []
        server = Server(model, max(a.levels), a.workers)
        try:
            asyncio.run(load(server.url(), 1, 1.0, a.seed))  # warm up: first-call costs
            for n in a.levels:
                row = summarize(n, asyncio.run(load(server.url(), n, a.seconds, a.seed)))
                rows.append(row)
                print(f"{n:>7} {row['partial_p50_ms']:>10.0f}ms {row['partial_p95_ms']:>6.0f}ms "
                      f"{row['partial_max_ms']:>6.0f}ms {row['final_p50_ms']:>8.0f}ms "
                      f"{row['final_max_ms']:>8.0f}ms {row['failed']:>7}  "
                      f"{'yes' if row['keeps_up'] else 'no'}", flush=True)
                if not row["keeps_up"] and len(rows) > 1 and not rows[-2]["keeps_up"]:
                    break  # two levels in a row failed: larger ones will too
        finally:
            server.stop()
        best = max((r["streams"] for r in rows if r["keeps_up"]), default=0)
        print(f"largest number of concurrent streams that keep up: {best}", flush=True)

        limit = ServeLimits().max_streams
        server = Server(model, None, a.workers)
        try:
            extra = 4
            results = asyncio.run(load(server.url(), limit + extra, 3.0, a.seed + 1))
        finally:
            server.stop()
        refused = [r for r in results if r.error and r.error.startswith("busy")]
        served = [r for r in results if r.final_ms is not None]
        clean = (len(refused) == extra and all(r.close_code == 1013 for r in refused)
                 and len(served) == limit)
        print(f"default --max-streams {limit}: {limit + extra} streams opened, {len(served)} "
              f"served, {len(refused)} refused with 'busy' and close code "
              f"{sorted({r.close_code for r in refused})}: {'clean' if clean else 'NOT clean'}")
        if a.json:
            from speechlab.files import atomic_write_json

            atomic_write_json(a.json, {"model": what, "levels": rows, "largest_keeping_up": best,
                                       "refusal": {"limit": limit, "served": len(served),
                                                   "refused": len(refused), "clean": clean}})
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
