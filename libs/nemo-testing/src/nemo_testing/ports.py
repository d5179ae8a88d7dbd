"""Loopback ports for servers started by tests."""

from __future__ import annotations

import asyncio
import secrets
import socket
import time
from pathlib import Path

from aiohttp import web

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Ports below the kernel's ephemeral range: outgoing connections and servers bound to port 0
# never take them, so a port handed out here stays free until the test's server binds it.
_LOWEST_CHOSEN_PORT = 20000
_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = _EPHEMERAL_RANGE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free and that nothing else will be given meanwhile.

    A port the kernel picks for ``bind(0)`` comes from the ephemeral range, where any outgoing
    connection may take it before the test's server binds it. Ports are therefore chosen below
    that range, and never twice in one test process.
    """
    first_ephemeral, _ = _ephemeral_range()
    candidates = range(_LOWEST_CHOSEN_PORT, first_ephemeral)
    for _ in range(200):
        if not candidates:
            break
        port = secrets.choice(candidates)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
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
