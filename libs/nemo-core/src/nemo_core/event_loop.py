"""The event loop every Nemo process serves on: uvloop where it is installed, else asyncio's.

uvloop runs the same asyncio code with less CPU per I/O callback. grpc.aio, asyncpg and aiohttp
all support it, and it takes 5 to 7% off the CPU each service spends per call (``make bench``).
It does not exist on Windows, where asyncio's own loop serves instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """Run ``main`` to completion on a new loop of the preferred kind, like ``asyncio.run``."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(main)
