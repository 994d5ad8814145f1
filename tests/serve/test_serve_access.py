"""Who may use a server (speechlab.serve.app.Access, the _Guard middleware): Host must name an
allowed host (a DNS-rebinding page cannot use a name of its own), a browser's Origin must too
(not merely match Host, which such a page sets), the token when there is one; loopback known by
address, not spelling. The middleware is driven directly, as ASGI."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("starlette")

from speechlab.errors import ConfigError  # noqa: E402
from speechlab.serve.app import Access, _Guard  # noqa: E402
from speechlab.serve.commands import allowed_hosts, checked_token, is_loopback  # noqa: E402


class _State:
    pass


class _App:
    """An ASGI app that answers 200 'ok' and records that it was reached."""

    state = _State()

    def __init__(self) -> None:
        self.reached = 0

    async def __call__(self, scope, receive, send):
        self.reached += 1
        if scope["type"] == "websocket":
            await send({"type": "websocket.accept"})
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _ask(access: Access, headers: dict[str, str], *, path: str = "/api/models", query: str = "",
         kind: str = "http") -> tuple[int | str, dict[str, str]]:
    app = _App()
    guard = _Guard(app, access)
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": kind, "path": path, "query_string": query.encode(),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(guard(scope, receive, send))
    first = sent[0]
    if first["type"] == "websocket.close":
        return "closed", {}
    if first["type"] == "websocket.accept":
        return "accepted", {}
    got = {k.decode(): v.decode() for k, v in first.get("headers", [])}
    assert (app.reached == 1) == (first["status"] == 200)
    return first["status"], got


def test_the_host_must_be_allowed_and_a_page_must_come_from_one():
    loop = Access.of()
    assert _ask(loop, {"host": "127.0.0.1:8000"})[0] == 200
    assert _ask(loop, {"host": "localhost:8000", "origin": "http://localhost:8000"})[0] == 200
    assert _ask(loop, {"host": "[::1]:8000"})[0] == 200
    # DNS rebinding: the attacker's page names its own host in both Host and Origin
    assert _ask(loop, {"host": "evil.example:8000", "origin": "http://evil.example:8000"})[0] == 403
    # another site's page calling the real host
    assert _ask(loop, {"host": "127.0.0.1:8000", "origin": "http://evil.example"})[0] == 403
    assert _ask(loop, {"host": "127.0.0.1:8000", "origin": "null"})[0] == 403
    assert _ask(loop, {})[0] == 403  # no Host at all
    lab = Access.of(["speech.lab.example", "10.1.2.3"])
    assert _ask(lab, {"host": "speech.lab.example:8000",
                      "origin": "https://speech.lab.example:8000"})[0] == 200
    assert _ask(lab, {"host": "10.1.2.3:8000"})[0] == 200
    assert _ask(lab, {"host": "127.0.0.1:8000"})[0] == 403  # not in this server's list
    assert _ask(lab, {"host": "speech.lab.example", "origin": "http://10.9.9.9"})[0] == 403
    assert _ask(loop, {"host": "evil.example"}, kind="websocket")[0] == "closed"
    assert _ask(loop, {"host": "127.0.0.1"}, kind="websocket")[0] == "accepted"


def test_a_token_is_needed_in_a_header_the_query_or_the_pages_cookie():
    token = "s3cret-token-0123456789"
    access = Access.of(token=token)
    host = {"host": "127.0.0.1:8000"}
    assert _ask(access, host)[0] == 401
    assert _ask(access, {**host, "authorization": "Bearer wrong-token-000000000"})[0] == 401
    assert _ask(access, {**host, "authorization": f"Bearer {token}"})[0] == 200
    assert _ask(access, host, query=f"model=x&token={token}")[0] == 200
    assert _ask(access, {**host, "cookie": f"speechlab_token={token}"})[0] == 200
    assert _ask(access, {**host, "cookie": "speechlab_token=nope; other=1"})[0] == 401
    assert _ask(access, host, kind="websocket")[0] == "closed"
    assert _ask(access, {**host, "cookie": f"speechlab_token={token}"},
                kind="websocket")[0] == "accepted"
    status, headers = _ask(access, host, path="/", query=f"token={token}")
    assert status == 200 and "HttpOnly" in headers["set-cookie"] and token in headers["set-cookie"]
    assert "set-cookie" not in _ask(Access.of(), host, path="/")[1]  # no token, no cookie


def test_loopback_is_known_by_address_and_the_allowed_hosts_follow_the_bind():
    for host in ("127.0.0.1", "127.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.1", "name.invalid"):
        assert not is_loopback(host), host
    assert set(allowed_hosts("127.1", None)) >= {"127.1", "localhost", "127.0.0.1", "::1"}
    assert allowed_hosts("0.0.0.0", "a.example, 10.0.0.5") == ["a.example", "10.0.0.5"]
    with pytest.raises(ConfigError, match="at least one host"):
        allowed_hosts("0.0.0.0", " , ")


def test_a_token_must_be_long_and_plain(monkeypatch):
    monkeypatch.delenv("SPEECHLAB_TOKEN", raising=False)
    assert checked_token(None) is None
    assert checked_token("abcdefghijklmnop") == "abcdefghijklmnop"
    monkeypatch.setenv("SPEECHLAB_TOKEN", "from-the-environment-1234")
    assert checked_token(None) == "from-the-environment-1234"
    for bad in ("short", "has space in it 123456", "semi;colon;is;bad;1234"):
        with pytest.raises(ConfigError, match="16-256 letters"):
            checked_token(bad)


def test_a_killed_servers_spool_is_removed_by_the_next_server(tmp_path, monkeypatch):
    """The upload spool is named by its server's pid: a server killed outright leaves it, and
    the next server in the same temporary directory removes it (a live server's stays)."""
    import os
    import subprocess
    import sys
    import tempfile

    from speechlab.serve.runtime import Runtime, ServeLimits

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = tmp_path / f".speechlab-serve-{dead}-abcd1234.tmp"
    (stale / "upload").mkdir(parents=True)
    live = tmp_path / f".speechlab-serve-{os.getppid()}-efgh5678.tmp"
    live.mkdir()
    runtime = Runtime({}, ServeLimits())
    try:
        assert runtime.uploads.parent == tmp_path and runtime.uploads.is_dir()
        assert not stale.exists() and live.exists()
    finally:
        runtime.close()
    assert not runtime.uploads.exists()


def test_a_trickling_body_is_dropped_once_its_average_rate_falls_short():
    """paced() on a planted clock: 100 bytes a (planted) second pass the 10 s grace, then the
    average under min_rate drops the request; a fast body passes whole."""
    from speechlab.serve.uploads import SlowBody, paced

    class Request:
        def __init__(self, chunks):
            self.chunks = chunks

        async def stream(self):
            for c in self.chunks:
                yield c

    now = [0.0]

    def clock():
        now[0] += 1.0  # every chunk takes a second
        return now[0]

    async def read(chunks, min_rate):
        got = []
        async for c in paced(Request(chunks), 5.0, min_rate, grace_seconds=10.0, clock=clock):
            got.append(c)
        return got

    with pytest.raises(SlowBody, match="bytes/s, under the 1000"):
        asyncio.run(read([b"x" * 100] * 30, 1000.0))
    now[0] = 0.0
    assert len(asyncio.run(read([b"x" * 5000] * 30, 1000.0))) == 30
