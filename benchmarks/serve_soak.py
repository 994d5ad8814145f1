"""A bounded soak of ``speechlab serve``: valid clients beside the abuse a shared lab server
meets, loopback only.

Starts ``speechlab serve`` in its own process with an RNN-T (the demo's multi-softmax LID
model, or an untrained one of the demo preset, as ``serve_load.py`` picks) and a tiny SALAD
package, measures two valid streams alone (the baseline), then for ``--seconds`` runs, side by
side:

- valid clients: two live streams at real-time pace, one after another, and a 2 s upload to
  ``/api/transcribe`` every few seconds;
- abuse: 30 TCP connections that send nothing (reopened when closed), 10 that trickle header
  lines, 4 uploads at 5 bytes/s, 2 WebSocket streams that send nothing, and a loop of bad
  inputs: WAV headers declaring 1 Hz and 3 MHz, float samples of 1e30 (upload and WebSocket),
  JSON nested 10,000 deep, a lone UTF-16 surrogate, a client leaving mid-upload.

It reports the valid streams' partial-result latency (p95) and final latency against the
baseline, the server's resident memory, threads and open file descriptors before the abuse
and once it has stopped (they must come back), and the tracebacks in the server's log (there
must be none). Targets: every valid stream and upload answered, p95 partial latency at most
2x the baseline's and at most 500 ms, no traceback, threads and fds back within a few of
their start and memory within 200 MB.

    python benchmarks/serve_soak.py [--seconds 120] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_load import RATE, Server, demo_model, one_stream, percentile, speech_like  # noqa: E402

P95_RATIO, P95_MAX_MS = 2.0, 500.0
ASR = "multisoftmax_lid"  # the served recognizer's name (its directory's)


def proc_stats(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {"rss_mb": int(fields["VmRSS"].split()[0]) / 1024,
            "threads": int(fields["Threads"]), "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def wav_bytes(samples: np.ndarray, rate: int, subtype: str = "PCM_16") -> bytes:
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, samples, rate, format="WAV", subtype=subtype)
    return buf.getvalue()


async def http(port: int, method: str, path: str, body: bytes = b"",
               timeout: float = 120.0) -> int:
    """One request on its own connection; the status (0 if the server closed first)."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        w.write(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await w.drain()
        line = await asyncio.wait_for(r.readline(), timeout)
        return int(line.split()[1]) if line else 0
    finally:
        w.close()


async def silent(port: int, stop: asyncio.Event, trickle: bool) -> None:
    """A connection that sends nothing (or a header line every 2 s), reopened when closed."""
    while not stop.is_set():
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.5)
            continue
        try:
            if trickle:
                w.write(b"GET /api/models HTTP/1.1\r\n")
            while not stop.is_set() and not r.at_eof():
                try:
                    await asyncio.wait_for(r.read(1024), 2.0)
                except asyncio.TimeoutError:
                    if trickle:
                        w.write(b"X-Slow: 1\r\n")
                        await w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            w.close()


async def slow_upload(port: int, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(f"POST /api/transcribe?model={ASR} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "Content-Length: 1000000\r\n\r\n".encode())
            while not stop.is_set() and not r.at_eof():
                w.write(b"RIFF."[:5])
                await w.drain()
                try:
                    await asyncio.wait_for(r.read(1024), 1.0)
                except asyncio.TimeoutError:
                    pass
            w.close()
        except (ConnectionError, OSError):
            await asyncio.sleep(0.5)


async def idle_stream(port: int, stop: asyncio.Event) -> None:
    from websockets.asyncio.client import connect

    while not stop.is_set():
        try:
            async with connect(f"ws://127.0.0.1:{port}/ws/asr?model={ASR}",
                               open_timeout=30) as ws:
                async for _ in ws:
                    if stop.is_set():
                        break
        except Exception:  # noqa: BLE001 - closed by the server, as it should
            await asyncio.sleep(0.2)


async def bad_inputs(port: int, stop: asyncio.Event, statuses: list[int]) -> None:
    from websockets.asyncio.client import connect

    zeros = np.zeros(4000, np.float32)
    huge = np.full(16000, 1e30, np.float32)
    bodies = [(f"/api/transcribe?model={ASR}", wav_bytes(zeros, 1, "FLOAT")),
              (f"/api/transcribe?model={ASR}", wav_bytes(zeros, 3_000_000, "FLOAT")),
              (f"/api/transcribe?model={ASR}", wav_bytes(huge, 16000, "FLOAT")),
              ("/api/synthesize?model=tts", b"[" * 10000 + b"]" * 10000),
              ("/api/synthesize?model=tts", json.dumps({"text": "caf\ud800"}).encode())]
    while not stop.is_set():
        for path, body in bodies:
            statuses.append(await http(port, "POST", path, body))
        try:
            async with connect(f"ws://127.0.0.1:{port}/ws/asr?model={ASR}",
                               open_timeout=30) as ws:
                await ws.send(huge[:1600].astype("<f4").tobytes())
                await asyncio.wait_for(ws.recv(), 30)
        except Exception:  # noqa: BLE001 - an error message, then maybe a close
            pass
        r, w = await asyncio.open_connection("127.0.0.1", port)  # leaves mid-upload
        w.write(f"POST /api/transcribe?model={ASR} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Length: 50000\r\n\r\nRIFF".encode())
        await w.drain()
        w.close()
        await asyncio.sleep(1.0)


async def valid(port: int, url: str, stop: asyncio.Event, results: list, uploads: list[int],
                seed: int) -> None:
    audio = speech_like(6.0, seed)
    upload = wav_bytes(speech_like(2.0, seed + 1), RATE)
    k = 0
    while not stop.is_set():
        results.append(await one_stream(url, audio, 0.0))
        if k % 2 == 0:
            uploads.append(await http(port, "POST", f"/api/transcribe?model={ASR}", upload))
        k += 1


async def soak(port: int, url: str, seconds: float) -> dict:
    stop = asyncio.Event()
    results: list = []
    uploads: list[int] = []
    statuses: list[int] = []
    tasks = [*(silent(port, stop, False) for _ in range(30)),
             *(silent(port, stop, True) for _ in range(10)),
             *(slow_upload(port, stop) for _ in range(4)),
             *(idle_stream(port, stop) for _ in range(2)),
             bad_inputs(port, stop, statuses),
             *(valid(port, url, stop, results, uploads, 10 + k) for k in range(2))]
    running = [asyncio.create_task(t) for t in tasks]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait(running, timeout=120)
    for t in running:
        t.cancel()
    return {"streams": results, "uploads": uploads, "bad_statuses": statuses}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=120.0)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    from speechlab.testing.tiny_models import salad_package

    with tempfile.TemporaryDirectory(prefix="serve-soak-") as tmp:
        model, what = demo_model(Path(tmp))
        tts = salad_package(Path(tmp) / "tts")
        server = _two_model_server(Path(model), tts)
        try:
            url = f"ws://127.0.0.1:{server.port}/ws/asr?model={ASR}"
            async def baseline() -> list:
                return list(await asyncio.gather(one_stream(url, speech_like(6.0, 1), 0.0),
                                                 one_stream(url, speech_like(6.0, 2), 0.05)))

            base = asyncio.run(baseline())
            base_p95 = percentile([v for r in base for v in r.partial_ms], 95)
            before = proc_stats(server.proc.pid)
            out = asyncio.run(soak(server.port, url, args.seconds))
            # the abuse has stopped: wait (bounded) for the server's threads and fds to settle
            deadline = time.monotonic() + 60
            after = proc_stats(server.proc.pid)
            while time.monotonic() < deadline and (after["threads"] > before["threads"] + 2
                                                   or after["fds"] > before["fds"] + 4):
                time.sleep(1.0)
                after = proc_stats(server.proc.pid)
        finally:
            server.stop()
            server.reader.join(timeout=10)
            log = "".join(server.log)
    streams = out["streams"]
    partial = [v for r in streams for v in r.partial_ms]
    finals = [r.final_ms for r in streams if r.final_ms is not None]
    p95 = percentile(partial, 95)
    tracebacks = log.count("Traceback")
    rows = {"model": what, "seconds": args.seconds, "baseline_p95_ms": round(base_p95, 1),
            "valid_streams": len(streams), "valid_finals": len(finals),
            "soak_p95_ms": round(p95, 1), "final_max_ms": round(max(finals), 1) if finals else None,
            "uploads": len(out["uploads"]), "uploads_ok": out["uploads"].count(200),
            "bad_inputs": len(out["bad_statuses"]),
            "bad_input_statuses": sorted(set(out["bad_statuses"])),
            "before": before, "after": after, "tracebacks": tracebacks}
    ok = (len(finals) == len(streams) > 0 and rows["uploads_ok"] == rows["uploads"] > 0
          and p95 <= max(P95_RATIO * base_p95, 1.0) and p95 <= P95_MAX_MS and tracebacks == 0
          and all(s < 500 for s in out["bad_statuses"])
          and after["threads"] <= before["threads"] + 2 and after["fds"] <= before["fds"] + 4
          and after["rss_mb"] <= before["rss_mb"] + 200)
    for k, v in rows.items():
        print(f"{k:>20}: {v}")
    print(f"targets (all valid clients answered, p95 <= {P95_RATIO:g}x baseline and "
          f"<= {P95_MAX_MS:g} ms, no 5xx, no traceback, threads/fds/memory back): "
          f"{'met' if ok else 'NOT met'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if ok else 1


def _two_model_server(asr: Path, tts: Path) -> Server:
    """``speechlab serve`` of the two models (named by their directories: ASR and tts)."""
    import re
    import subprocess

    server = Server.__new__(Server)
    argv = [sys.executable, "-m", "speechlab", "serve", str(asr), str(tts), "--port", "0"]
    server.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    server.name = asr.name
    for line in server.proc.stdout:
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if m:
            server.port = int(m.group(1))
            # keep draining its output (a full pipe would block the server) for the count of
            # tracebacks
            import threading

            server.log = []
            server.reader = threading.Thread(target=lambda: server.log.extend(server.proc.stdout),
                                             daemon=True)
            server.reader.start()
            return server
    raise RuntimeError("speechlab serve did not start")


if __name__ == "__main__":
    sys.exit(main())
