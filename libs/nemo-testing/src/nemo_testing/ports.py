"""Loopback ports for servers started by tests."""

from __future__ import annotations

import asyncio
import socket
import time

from aiohttp import web


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 15.0) -> None:
    """Block until something accepts connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on 127.0.0.1:{port}") from None
            time.sleep(0.05)


async def serve_on_loopback(runner: web.AppRunner, port: int = 0) -> int:
    """Set up ``runner`` and serve it on 127.0.0.1:``port`` (0: a free one); returns the port."""
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.Server)
    return int(server.sockets[0].getsockname()[1])
