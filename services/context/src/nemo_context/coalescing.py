"""Group commit: items handed in while a batch is being processed go together in the next one.

Snapshot writes pay a fixed price per operation (a PostgreSQL round trip, a hop to a worker
thread) that dwarfs the item itself. A :class:`Coalescer` runs one batch at a time: alone, an
item is processed at once; under load, every item that arrives while a batch runs waits for it
and joins the next. No item ever waits on a timer, and each caller learns its own item's outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeAlias, TypeVar

_T = TypeVar("_T")

Outcomes: TypeAlias = Sequence[BaseException | None]
"""Per item of a batch, in order: None when it succeeded, else what its caller must raise."""


class Coalescer(Generic[_T]):
    """Processes submitted items in batches, one batch at a time."""

    def __init__(self, process: Callable[[list[_T]], Awaitable[Outcomes]]) -> None:
        self._process = process
        self._waiting: list[tuple[_T, asyncio.Future[None]]] = []
        self._runner: asyncio.Task[None] | None = None

    async def submit(self, item: _T) -> None:
        """Process ``item`` (with whatever else is waiting); raises what its processing raised."""
        done = asyncio.get_running_loop().create_future()
        self._waiting.append((item, done))
        if self._runner is None:
            # A task of its own: a caller that gives up must not cancel the others' batch.
            self._runner = asyncio.create_task(self._run())
        await done

    async def _run(self) -> None:
        batch: list[tuple[_T, asyncio.Future[None]]] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                await self._run_batch(batch)
        except asyncio.CancelledError:
            # Stopped (at shutdown): nobody may be left waiting for an outcome.
            for _, done in [*batch, *self._waiting]:
                done.cancel()
            self._waiting = []
            raise
        finally:
            self._runner = None

    async def _run_batch(self, batch: list[tuple[_T, asyncio.Future[None]]]) -> None:
        try:
            outcomes: Outcomes = await self._process([item for item, _ in batch])
            if len(outcomes) != len(batch):
                raise RuntimeError("a batch must give one outcome per item")
        except Exception as error:
            outcomes = [error] * len(batch)
        for (_, done), outcome in zip(batch, outcomes, strict=True):
            if done.done():  # its caller gave up (a timeout): nobody is waiting
                continue
            if outcome is None:
                done.set_result(None)
            else:
                done.set_exception(outcome)

    async def aclose(self) -> None:
        """Wait for the items already submitted."""
        if self._runner is not None:
            await asyncio.shield(self._runner)
