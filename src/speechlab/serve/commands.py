"""``speechlab serve [PATH...] [--host 127.0.0.1] [--port 8000]``: the models at PATH (anything
``speechlab.load`` takes, shipped models' names included), with none the shipped models, or
with ``--demo DIR`` those of a ``make demo`` run, behind a local web page and its
HTTP/WebSocket interface (:mod:`speechlab.serve.app`).

The port is bound before the models load, so a port in use is said at once; the server listens
on the loopback address unless ``--host`` names another, and says so when it does.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
from dataclasses import fields
from pathlib import Path

from speechlab.devices import add_device_options
from speechlab.config import bounded
from speechlab.errors import ConfigError, DataError
from speechlab.serve.runtime import ServeLimits

DEFAULT_DEMO = Path("exp/demo")
#: What Ctrl-C or SIGTERM gives open connections before the server stops.
SHUTDOWN_SECONDS = 2


TOKEN_ENV = "SPEECHLAB_TOKEN"
WILDCARDS = ("0.0.0.0", "::", "")


def _addresses(host: str) -> set[str]:
    """The addresses ``host`` resolves to (none if it does not)."""
    try:
        return {info[4][0] for info in socket.getaddrinfo(host.strip("[]"), None)}
    except (socket.gaierror, UnicodeError):
        return set()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine's loopback, by address: every address it resolves to
    is in 127.0.0.0/8 or ::1 (``127.1`` and ``localhost`` are; ``0.0.0.0`` is every
    interface)."""
    if host.strip("[]") in WILDCARDS:
        return False
    found = _addresses(host)
    return bool(found) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found)


def allowed_hosts(host: str, given: str | None) -> list[str]:
    """The host names requests may address the server by: ``given`` (comma-separated), else
    the bound address and the loopback names, and, bound to every interface, this machine's
    names and addresses."""
    from speechlab.serve.app import LOOPBACK_HOSTS

    if given:
        names = [h.strip() for h in given.split(",") if h.strip()]
        if not names:
            raise ConfigError("--allowed-hosts: give at least one host name")
        return names
    names = [*LOOPBACK_HOSTS]
    bare = host.strip("[]")
    if bare not in WILDCARDS:
        names.append(bare)
    else:
        for name in (socket.gethostname(), socket.getfqdn()):
            names.append(name)
            names.extend(sorted(_addresses(name)))
    return list(dict.fromkeys(names))


def checked_token(token: str | None) -> str | None:
    """``--token`` (or ``SPEECHLAB_TOKEN``): at least 16 characters of letters, digits and
    ``-._~`` (it travels in headers, URLs and a cookie)."""
    import os
    import re

    token = token or os.environ.get(TOKEN_ENV) or None
    if token is not None and not re.fullmatch(r"[A-Za-z0-9._~-]{16,256}", token):
        raise ConfigError(f"--token / {TOKEN_ENV}: use 16-256 letters, digits and -._~ (e.g. "
                          "python -c 'import secrets; print(secrets.token_urlsafe())')")
    return token


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free one)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise ConfigError(f"--host {host!r}: not an address of this machine ({e.strerror})") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        sock.close()
        if e.errno in (98, 48):  # EADDRINUSE on Linux, macOS
            raise ConfigError(f"port {port} on {host} is in use; stop what uses it or choose "
                              "another with --port") from None
        raise ConfigError(f"cannot listen on {host}:{port} ({e.strerror}); choose another "
                          "--host or --port") from None
    sock.set_inheritable(True)
    return sock


def model_paths(paths: list[Path], demo: Path | None) -> list[Path]:
    """``paths``; with none, the models of the ``make demo`` run under ``demo`` if it is given,
    else the shipped models (:mod:`speechlab.shipped`, in :func:`~speechlab.shipped.serve_order`:
    the first is the page's default), else those of ``exp/demo``."""
    from speechlab.serve.models import DEMO_MODELS, demo_paths
    from speechlab.shipped import models_dir, serve_order

    if paths:
        return paths
    if demo is None:
        ships = serve_order()
        if ships:
            return ships
        print(f"note: no shipped models in {models_dir()}; serving those of `make demo` in "
              f"{DEFAULT_DEMO}", flush=True)
        demo = DEFAULT_DEMO
    found, missing = demo_paths(demo)
    if not found:
        wanted = "; ".join(f"{paper}: {', '.join(names)}" for paper, names in DEMO_MODELS.items())
        raise DataError(f"no model to serve: no PATH was given and {demo} holds no model of "
                        f"`make demo` (looked for <paper>/models/NAME, {wanted}); run `make demo` "
                        "first, or give model paths (packages, OUT/models/NAME, Hugging Face "
                        "directories)")
    if missing:
        print(f"note: {demo} lacks {', '.join(str(p.relative_to(demo)) for p in missing)}; "
              "serving the demo models it has", flush=True)
    return found


def uvicorn_config(app: object, limits: ServeLimits) -> object:
    """How uvicorn runs the app: frames, keep-alive, the connection cap, the header deadline
    (:mod:`.protocol`) and the shutdown grace."""
    import uvicorn

    from speechlab.serve.protocol import HeaderDeadlineProtocol

    return uvicorn.Config(app, log_level="warning", lifespan="on",
                          ws_max_size=int(limits.max_frame_mb * 2**20),
                          ws_per_message_deflate=False, timeout_keep_alive=5,
                          # connections beyond streams and jobs only wait: bound them too
                          limit_concurrency=4 * (limits.max_streams + limits.max_jobs) + 16,
                          # Ctrl-C / SIGTERM: connections get 2 s to finish
                          timeout_graceful_shutdown=SHUTDOWN_SECONDS,
                          # connections that never complete a request's headers are closed
                          http=HeaderDeadlineProtocol)


def _run_serve(args: argparse.Namespace) -> int:
    import torch
    import uvicorn

    from speechlab.serve.app import Access, create_app
    from speechlab.serve.models import load_models
    limits = ServeLimits(**{f.name: getattr(args, f.name) for f in fields(ServeLimits)
                            if getattr(args, f.name, None) is not None})
    paths = model_paths(args.paths, args.demo)
    sock = bind(args.host, args.port)
    try:
        # Streams run side by side on the worker threads; one thread per step keeps them
        # from fighting over the cores.
        torch.set_num_threads(1)
        print(f"loading {len(paths)} model(s):", flush=True)
        models = load_models(paths, say=lambda line: print(line, flush=True),
                             backend=args.backend, device=args.device)
        loopback = is_loopback(args.host)
        hosts = allowed_hosts(args.host, args.allowed_hosts)
        token = checked_token(args.token)
        app = create_app(models, limits, access=Access.of(hosts, token))
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        if not loopback:
            print(f"warning: listening on {args.host}, not only this machine's loopback: anyone "
                  "who can reach it can use these models"
                  + (" with the token" if token else "; give --token to require one"),
                  flush=True)
            print(f"requests may name: {', '.join(hosts)} (--allowed-hosts)", flush=True)
        print(f"speechlab serve: http://{shown}:{port}/ (Ctrl-C stops it)", flush=True)
        config = uvicorn_config(app, limits)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    # The server has stopped and its spool is removed; work still on the job threads (a long
    # decode, a slow upload's job) has nobody left to answer, so the process leaves without
    # waiting for it.
    print("speechlab serve: stopped", flush=True)
    sys.stderr.flush()
    os._exit(0)


def add_commands(sub: argparse._SubParsersAction) -> None:
    d = ServeLimits()
    s = sub.add_parser(
        "serve", help="a local web app over trained models: live transcription, synthesis, "
        "attention diagnosis, lattices",
        description="Serve models (packages, OUT/models/NAME of a run, Hugging Face wav2vec 2.0 "
        "directories, shipped models' names; with none, the shipped models, or with --demo "
        "DIR those of a `make demo` run) behind a web page and an "
        "HTTP/WebSocket interface: GET /api/models, POST /api/transcribe?model=NAME (a WAV), "
        "WS /ws/asr?model=NAME, POST /api/synthesize?model=NAME ({\"text\"}).")
    s.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: loopback only)")
    s.add_argument("--port", type=bounded(int, ge=0, le=65535), default=8000,
                   help="TCP port (0: any free one)")
    s.add_argument("--allowed-hosts", dest="allowed_hosts", default=None, metavar="NAMES",
                   help="comma-separated host names clients may address the server by (Host "
                        "and a page's Origin); default: the bound address and the loopback "
                        "names, and with --host 0.0.0.0 this machine's names and addresses")
    s.add_argument("--token", default=None,
                   help=f"a shared token every request must carry (default: ${TOKEN_ENV}; "
                        "none on loopback): Authorization: Bearer TOKEN, ?token=TOKEN, or open "
                        "the page as http://HOST:PORT/?token=TOKEN")
    s.add_argument("--demo", type=Path, default=None,
                   help="with no PATH, serve the models of this `make demo` output instead of "
                        f"the shipped ones (e.g. {DEFAULT_DEMO})")
    s.add_argument("--max-upload-mb", dest="max_upload_mb",
                   type=bounded(float, gt=0, le=4096, why="uploads are spooled to disk"),
                   default=None, help=f"largest upload (default {d.max_upload_mb:g})")
    s.add_argument("--max-streams", dest="max_streams",
                   type=bounded(int, ge=1, le=1024), default=None,
                   help=f"live streams at once; more are told the server is busy (default "
                        f"{d.max_streams}, measured on 2 cores by benchmarks/serve_load.py)")
    s.add_argument("--max-audio-s", dest="max_audio_seconds",
                   type=bounded(float, gt=0, le=86400), default=None,
                   help=f"audio one upload or one stream may hold, read from its header "
                        f"(default {d.max_audio_seconds:g})")
    s.add_argument("--idle-s", dest="idle_seconds", type=bounded(float, gt=0, le=3600),
                   default=None, help=f"close a stream that sends nothing for this long "
                   f"before 'done' (default {d.idle_seconds:g})")
    s.add_argument("--min-body-kbps", dest="min_body_kbps", type=bounded(float, ge=0, le=1e6),
                   default=None, help=f"drop a request body that comes slower than this on "
                   f"average after 10 s, or stalls for {d.body_idle_seconds:g} s (default "
                   f"{d.min_body_kbps:g} KB/s)")
    s.add_argument("--backend", choices=("torch", "onnx"), default=None,
                   help="onnx: run the models that can (RNN-T, TTS) on onnxruntime, the others "
                        "in PyTorch (default: each model as it loads)")
    s.add_argument("--workers", type=bounded(int, ge=1, le=64), default=None,
                   help=f"threads decoding streams (default {d.workers}: one per core)")
    s.add_argument("--new-words", dest="new_words", action="store_true",
                   help="let a request's hotwords add words a CTC-topology model lacks (each new "
                        "set builds its decoding graph again: seconds to tens of seconds of one "
                        "core, during which that model's other requests wait); default: refused")
    add_device_options(s, precision=False)
    s.set_defaults(func=_run_serve)
