"""A bound on how long the edge waits for a request's headers.

uvicorn closes an idle keep-alive connection, but a client that keeps sending a header a byte at
a time holds its connection (and a slot of the server) for as long as it likes. This protocol
starts a timer when a connection opens, and again when it is ready for its next request, and
closes the connection when the request's headers are not complete in time. The body is bounded
by the endpoint (:mod:`nemo_toolplane.mcp.endpoint`), which answers 408.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)


class HeaderTimeoutProtocol(H11Protocol):
    """H11Protocol closing a connection whose request headers are not complete within
    :attr:`header_timeout_seconds`."""

    header_timeout_seconds = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(
            self.header_timeout_seconds, self._headers_too_slow
        )

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        super().data_received(data)
        if self.cycle is not cycle:
            # The headers of a request were complete: its body is the endpoint's to bound.
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            source = self.client[0] if self.client else "unknown"
            logger.warning(
                "closed a connection whose headers came too slowly", extra={"source": source}
            )
            self.transport.close()


def header_timeout_protocol(seconds: float) -> type[HeaderTimeoutProtocol]:
    """uvicorn's HTTP/1.1 protocol with a header deadline of ``seconds``."""
    return type(
        "HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout_seconds": seconds}
    )
