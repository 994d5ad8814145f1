"""The web app of ``speechlab serve``: :func:`create_app` takes models already loaded and gives a
Starlette (ASGI) app, which uvicorn runs.

The interface (scripts and checks rely on it):

- ``GET /``: the page (``static/``: plain HTML and JavaScript modules, no build step);
- ``GET /api/models``: ``[{name, kind, streaming, languages}]``;
- ``POST /api/transcribe?model=NAME[&language=L][&tau=T&s_th=S][&filename=F]``, the body a WAV
  (any file libsndfile reads): the JSON object of ``speechlab transcribe --json`` (``file`` is
  ``filename``, default ``upload.wav``);
- ``WS /ws/asr?model=NAME``: live recognition (:mod:`.streams`);
- ``POST /api/synthesize?model=NAME``, JSON ``{"text"}``: a 16-bit WAV.

and, for the page's panels:

- ``GET /api/capabilities``: ``{name: [what the model does in the page]}``
  (:meth:`~.models.ServedModel.capabilities`);
- ``POST /api/speech?model=NAME``, JSON ``{"text"}``: the speech (base64 WAV) with its F0 and
  spectrogram (:func:`.panels.speech_view`);
- ``POST /api/attention?model=NAME``, body a WAV: per-block attention maps and labels
  (:func:`.panels.attention_view`);
- ``POST /api/lattice?model=NAME``, body a WAV: Viterbi words, the lattice's best hypotheses
  with their BHP (:func:`.panels.lattice_view`).

Errors are JSON ``{"error": message}``: 400 bad input, 401 a missing or wrong token, 404 unknown
model or path, 403 a request naming a host not allowed or from another site's page, 413 too
large, 503 busy.

Who may ask (:class:`Access`): the Host header must name one of the allowed host names (by
default the loopback names; ``speechlab serve --allowed-hosts``), so a DNS-rebinding page
cannot reach the server under a name of its own; a browser's Origin, when sent, must name one
of them too (not merely match Host, which such a page controls); and with a token
(``--token`` / ``SPEECHLAB_TOKEN``) every request carries it: ``Authorization: Bearer TOKEN``,
``?token=TOKEN``, or the cookie that ``GET /?token=TOKEN`` sets for the page. Nothing a client
sends names a file on the server, and nothing is unpickled: models are loaded before the server
starts.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from speechlab.errors import ConfigError, DataError, SpeechlabError
from speechlab.serve.models import ServedModel
from speechlab.serve.runtime import (Busy, Departed, Departure, NotFound, Runtime,
                                     ServeLimits)
from speechlab.serve.streams import AsrSession
from speechlab.serve.uploads import (SlowBody, TooLarge, read_audio, read_small_body,
                                     renamed_errors, save_body, wav_bytes)

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
#: Largest JSON body (the text to synthesize and its quoting).
MAX_JSON_BYTES = 1 << 20
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
TOKEN_COOKIE = "speechlab_token"


class Forbidden(Exception):
    """A request another site's page made (HTTP 403)."""


@dataclass(frozen=True)
class Access:
    """Who may use the server: the host names requests may address it by (Host and Origin),
    and an optional shared token."""

    hosts: frozenset[str] = frozenset(LOOPBACK_HOSTS)
    token: str | None = None

    @classmethod
    def of(cls, hosts: Any = LOOPBACK_HOSTS, token: str | None = None) -> Access:
        return cls(frozenset(h.strip().strip("[]").lower() for h in hosts if h.strip()),
                   token or None)

    def allows_host(self, host: str) -> bool:
        """Whether a ``Host`` header (``name[:port]``) names an allowed host."""
        name = urlsplit("//" + host).hostname if host else None
        return name is not None and name.lower() in self.hosts

    def allows_origin(self, origin: str | None) -> bool:
        """Whether a browser's ``Origin`` is an allowed host's page (no Origin: a script)."""
        if origin is None:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and (parts.hostname or "").lower() in self.hosts

    def token_of(self, headers: dict[str, str], query: str) -> str | None:
        """The token a request carries (header, query or cookie), if any."""
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        given = parse_qs(query).get("token")
        if given:
            return given[0]
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed cookie header carries no token
            return None
        return cookie[TOKEN_COOKIE].value if TOKEN_COOKIE in cookie else None

    def allows_token(self, given: str | None) -> bool:
        if self.token is None:
            return True
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def create_app(models: Mapping[str, Any], limits: ServeLimits = ServeLimits(), *,
               access: Access = Access()) -> Starlette:
    """The app serving ``models`` (name -> anything :func:`speechlab.load` returned) within
    ``limits``, to the requests ``access`` allows (module doc). The handlers below find the
    server's :class:`~.runtime.Runtime` in ``app.state.runtime``."""
    served = {name: m if isinstance(m, ServedModel) else ServedModel(name, m)
              for name, m in models.items()}
    runtime = Runtime(served, limits)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        runtime.close()

    app = Starlette(routes=ROUTES, lifespan=lifespan, exception_handlers=_HANDLERS)
    app.state.runtime = runtime
    return _Guard(app, access)


# ---------------------------------------------------------------------------------------------
# The routes


def _runtime(connection: Any) -> Runtime:
    return connection.app.state.runtime


async def index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html")


async def list_models(request: Request) -> Response:
    return JSONResponse([m.describe() for m in _runtime(request).models.values()])


async def capabilities(request: Request) -> Response:
    return JSONResponse({m.name: m.capabilities() for m in _runtime(request).models.values()})


async def transcribe(request: Request) -> Response:
    runtime = _runtime(request)
    model = runtime.model(request.query_params.get("model"), "asr")
    opts = model.options(request.query_params)
    name = request.query_params.get("filename") or "upload.wav"
    path = await _received(request, runtime)
    try:
        with runtime.jobs:
            result = await runtime.job(model, _transcribe_file, model.model, path, name, opts,
                                       runtime.limits.max_audio_seconds, watch=request)
    finally:
        path.unlink(missing_ok=True)
    return JSONResponse(result)


async def _received(request: Request, runtime: Runtime) -> Path:
    """The request's body spooled to disk, under a slot for bodies being received: a client
    trickling its upload holds one of those (until it is dropped for its pace), never one of
    the few inference slots the others need."""
    with runtime.receiving:
        return await save_body(request, runtime.uploads, runtime.limits.max_upload_bytes,
                               **runtime.limits.body_pace)


async def _text(request: Request, runtime: Runtime) -> str:
    """The ``text`` of a JSON body, checked."""
    body = await read_small_body(request, MAX_JSON_BYTES, **runtime.limits.body_pace)
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DataError('the body must be JSON: {"text": "..."}') from None
    except RecursionError:  # JSON nested thousands deep
        raise DataError('the body must be JSON of the form {"text": "..."}, not nested '
                        "deeper") from None
    text = data.get("text") if isinstance(data, dict) else None
    if not isinstance(text, str):
        raise DataError('the body must be JSON with a string "text": {"text": "..."}')
    if not text.strip():
        raise DataError("the text is empty")
    if len(text) > runtime.limits.max_text_chars:
        raise DataError(f"the text has {len(text)} characters; this server synthesizes at "
                        f"most {runtime.limits.max_text_chars} at once")
    return text


async def _speak(request: Request, fn: Any, *args: Any) -> Any:
    """``fn(model, text, *args)`` on the job thread for the TTS model and the JSON text the
    request names (the body received under its own slot, the job under a job slot)."""
    runtime = _runtime(request)
    model = runtime.model(request.query_params.get("model"), "tts")
    with runtime.receiving:
        text = await _text(request, runtime)
    with runtime.jobs:
        return await runtime.job(model, fn, model.model, text, *args)


async def synthesize(request: Request) -> Response:
    speech = await _speak(request, _synthesize)
    return Response(wav_bytes(speech.waveform, speech.sample_rate), media_type="audio/wav")


async def speech(request: Request) -> Response:
    from speechlab.serve.panels import speech_view

    return JSONResponse(await _speak(request, _speech, speech_view))


async def _analysis(request: Request, model: ServedModel, fn: Any) -> Response:
    """An uploaded recording through ``fn`` (a panel's view) on the job thread."""
    runtime = _runtime(request)
    name = request.query_params.get("filename") or "upload.wav"
    path = await _received(request, runtime)
    try:
        with runtime.jobs:
            out = await runtime.job(model, _analyse, fn, path, name,
                                    runtime.limits.max_analysis_seconds, watch=request)
    finally:
        path.unlink(missing_ok=True)
    return JSONResponse(out)


async def attention(request: Request) -> Response:
    from speechlab.serve.panels import attention_view

    model = _runtime(request).model(request.query_params.get("model"))
    encoder = model.encoder
    if encoder is None:
        raise ConfigError(f"{model.name} is not a wav2vec 2.0 model: it has no attention "
                          "maps to diagnose")
    return await _analysis(request, model, lambda x: attention_view(encoder, x))


async def lattice(request: Request) -> Response:
    from speechlab.serve.panels import lattice_view

    model = _runtime(request).model(request.query_params.get("model"))
    if not model.has_lattice:
        raise ConfigError(f"{model.name} is not a CTC-topology model with a decoding graph")
    return await _analysis(request, model, lambda x: lattice_view(model.model, x))


async def asr_socket(ws: Any) -> None:
    await AsrSession(ws, _runtime(ws)).run()


ROUTES = [
    Route("/", index),
    Route("/api/models", list_models),
    Route("/api/capabilities", capabilities),
    Route("/api/transcribe", transcribe, methods=["POST"]),
    Route("/api/synthesize", synthesize, methods=["POST"]),
    Route("/api/speech", speech, methods=["POST"]),
    Route("/api/attention", attention, methods=["POST"]),
    Route("/api/lattice", lattice, methods=["POST"]),
    WebSocketRoute("/ws/asr", asr_socket),
    Mount("/static", StaticFiles(directory=STATIC), name="static"),
]


def _error(status: int):
    async def handler(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=status)

    return handler


async def _internal(request: Request, exc: Exception) -> Response:
    # Starlette raises the exception again after this response, and uvicorn logs it.
    return JSONResponse({"error": "internal error (logged on the server)"}, status_code=500)


async def _too_large(request: Request, exc: Exception) -> Response:
    # Closing the connection stops the client's upload; kept open, the server would have to
    # read the rest of the body (and throw it away) before the next request.
    return JSONResponse({"error": str(exc)}, status_code=413, headers={"Connection": "close"})


async def _gone(request: Request, exc: Exception) -> Response:
    # The client went away mid-request: nobody reads this answer, and nothing went wrong here.
    if isinstance(exc, Departed):
        log.info("%s %s: %s; its job stopped", request.method, request.url.path, exc)
    return Response(status_code=400, headers={"Connection": "close"})


async def _slow(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc)}, status_code=408, headers={"Connection": "close"})


_HANDLERS = {SpeechlabError: _error(400), NotFound: _error(404), Forbidden: _error(403),
             TooLarge: _too_large, SlowBody: _slow, ClientDisconnect: _gone,
             Departed: _gone, Busy: _error(503),
             Exception: _internal}


class _Guard:
    """ASGI middleware: security headers on every response; requests naming a host not
    allowed (Host), from another site's page (Origin), or without the token refused
    (:class:`Access`). ``GET /?token=T`` with the right token sets the page's cookie."""

    HEADERS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
               (b"content-security-policy",
                b"default-src 'self'; img-src 'self' data: blob:; media-src 'self' data: blob:; "
                b"connect-src 'self'; object-src 'none'; frame-ancestors 'none'")]

    def __init__(self, app: Starlette, access: Access) -> None:
        self.app = app
        self.access = access
        self.state = app.state

    def refusal(self, scope: dict) -> tuple[int, str] | None:
        """(status, reason) for a request the access rules refuse, else None."""
        try:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in scope["headers"]}
        except (UnicodeDecodeError, ValueError):
            return 400, "malformed headers"
        host = headers.get("host", "")
        if not self.access.allows_host(host):
            return 403, (f"this server answers to {', '.join(sorted(self.access.hosts))}, not "
                         f"to {host!r} (speechlab serve --allowed-hosts)")
        if not self.access.allows_origin(headers.get("origin")):
            return 403, "requests from another site's page are refused"
        query = scope.get("query_string", b"").decode("latin-1")
        if not self.access.allows_token(self.access.token_of(headers, query)):
            return 401, "this server needs its token: Authorization: Bearer TOKEN, or ?token="
        return None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        refused = self.refusal(scope)
        if refused is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            status, reason = refused
            response = JSONResponse({"error": reason}, status_code=status)
            return await response(scope, receive, send)
        cookie = None
        if self.access.token is not None and scope["type"] == "http" and scope["path"] == "/":
            # the page's own requests then carry the token without the page knowing it
            cookie = (f"{TOKEN_COOKIE}={self.access.token}; HttpOnly; SameSite=Strict; "
                      "Path=/").encode("latin-1")

        async def with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                extra = self.HEADERS + ([(b"set-cookie", cookie)] if cookie else [])
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        await self.app(scope, receive, with_headers)


# ---------------------------------------------------------------------------------------------
# Work done on the job thread


def _transcribe_file(model: Any, path: Path, name: str, opts: dict[str, Any],
                     max_seconds: float, departure: Departure) -> dict[str, Any]:
    from speechlab.audio.io import validate_audio_file

    with renamed_errors(path, name):
        # The header here (its rate and length bounded before anything is sized by them); the
        # recognizer's block reader checks every block's samples as it decodes, so the upload
        # is read once.
        info = validate_audio_file(path, expected_sr=None, channels=None, finite=False)
        seconds = info.frames / info.sample_rate
        if seconds > max_seconds:
            raise DataError(f"{name} lasts {seconds:.0f} s; this server transcribes at most "
                            f"{max_seconds:g} s at once (--max-audio-s)")
        # checked at every chunk: a client that left stops the job there
        result = model.transcribe(path, progress=departure.check, **opts)
    return result.to_json(name)


def _synthesize(model: Any, text: str) -> Any:
    import numpy as np

    speech = model.synthesize(text=text)
    if not np.isfinite(speech.waveform).all():
        raise DataError("the vocoder gave non-finite samples (the model's normalizers are "
                        "broken?); retrain the model")
    return speech


def _speech(model: Any, text: str, view: Any) -> dict[str, Any]:
    speech = _synthesize(model, text)
    out = view(speech)
    out["wav"] = base64.b64encode(wav_bytes(speech.waveform, speech.sample_rate)).decode("ascii")
    return out


def _analyse(fn: Any, path: Path, name: str, max_seconds: float, departure: Departure
             ) -> dict[str, Any]:
    samples = read_audio(path, name, max_seconds)
    departure.check()
    with renamed_errors(path, name):
        return fn(samples)
