"""uvicorn's HTTP/1.1 protocol with a deadline for a request's headers.

uvicorn closes a connection that stays idle after a response (``timeout_keep_alive``), but not
one that never completes its first request's headers: connections that send nothing, or
trickle header lines, would stay open for ever and count against ``limit_concurrency``, so a
few dozen of them turn every other client away with 503. Here a connection whose request
headers are not complete :data:`HEADER_SECONDS` after its first byte (or after it opened) is
closed.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Seconds a connection has to complete a request's headers.
HEADER_SECONDS = 10.0


class HeaderDeadlineProtocol(H11Protocol):
    """:class:`H11Protocol` closing connections that do not complete a request's headers in
    :attr:`header_seconds`."""

    header_seconds = HEADER_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _waiting_for_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE and not self.transport.is_closing()

    def _arm(self) -> None:
        """Start the deadline while the next request's headers are awaited; stop it once they
        have come."""
        if not self._waiting_for_headers():
            self._disarm()
        elif self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_seconds, self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        if self._waiting_for_headers():
            self.transport.close()
