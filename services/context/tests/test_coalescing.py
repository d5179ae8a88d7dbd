"""Group commit: items submitted while a batch runs go together in the next batch; each caller
gets its own item's outcome; a caller that gives up does not stop the others."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from nemo_context.coalescing import Coalescer, Outcomes
from nemo_context.snapshots.objects import LocalDirectoryObjects


class Doubler:
    """A batch process that fails the odd numbers and keeps the batches it was given."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.release = asyncio.Event()

    async def process(self, items: list[int]) -> Outcomes:
        self.batches.append(items)
        await self.release.wait()
        return [None if item % 2 == 0 else ValueError(f"odd {item}") for item in items]


async def test_items_submitted_during_a_batch_go_together_in_the_next() -> None:
    doubler = Doubler()
    coalescer = Coalescer(doubler.process)
    first = asyncio.create_task(coalescer.submit(0))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the first batch is running
    later = [asyncio.create_task(coalescer.submit(item)) for item in (2, 4, 6)]
    await asyncio.sleep(0)
    doubler.release.set()

    await asyncio.gather(first, *later)

    assert doubler.batches == [[0], [2, 4, 6]]


async def test_each_caller_gets_its_own_outcome() -> None:
    doubler = Doubler()
    doubler.release.set()
    coalescer = Coalescer(doubler.process)

    results = await asyncio.gather(
        *(coalescer.submit(item) for item in range(4)), return_exceptions=True
    )

    assert results[0] is None
    assert results[2] is None
    assert [str(result) for result in results[1::2]] == ["odd 1", "odd 3"]


async def test_a_failing_batch_fails_each_of_its_callers() -> None:
    async def broken(items: list[int]) -> Outcomes:
        raise OSError("disk gone")

    coalescer = Coalescer(broken)
    results = await asyncio.gather(coalescer.submit(1), coalescer.submit(2), return_exceptions=True)
    assert [type(result) for result in results] == [OSError, OSError]


async def test_a_caller_that_gives_up_leaves_the_batch_running() -> None:
    doubler = Doubler()
    coalescer = Coalescer(doubler.process)
    quitter = asyncio.create_task(coalescer.submit(0))
    stayer = asyncio.create_task(coalescer.submit(2))
    await asyncio.sleep(0)
    quitter.cancel()
    doubler.release.set()

    await stayer
    await coalescer.aclose()

    assert doubler.batches == [[0, 2]]
    with pytest.raises(asyncio.CancelledError):
        await quitter


def _key(learner_ref: str) -> str:
    return f"ai-context/2026-11-29/{learner_ref}/{uuid.uuid4()}.json"


async def test_concurrent_local_writes_all_land_and_a_bad_one_fails_alone(tmp_path: Path) -> None:
    objects = LocalDirectoryObjects(tmp_path)
    blocked_ref = "nemo_00000000bad0"
    # A file where the pseudonym's directory should be: writes under it cannot succeed.
    (tmp_path / "ai-context" / "2026-11-29").mkdir(parents=True)
    (tmp_path / "ai-context" / "2026-11-29" / blocked_ref).write_bytes(b"")
    good = {_key("nemo_0123456789ab"): f'{{"n":{n}}}'.encode() for n in range(10)}
    bad = _key(blocked_ref)

    results = await asyncio.gather(
        *(objects.put(key, body) for key, body in good.items()),
        objects.put(bad, b"{}"),
        return_exceptions=True,
    )

    assert results[:-1] == [None] * len(good)
    assert isinstance(results[-1], OSError)
    for key, body in good.items():
        assert await objects.get(key) == body


async def test_a_stopped_coalescer_leaves_no_caller_waiting() -> None:
    doubler = Doubler()  # never released: the batch is still running when the runner stops
    coalescer = Coalescer(doubler.process)
    running = asyncio.create_task(coalescer.submit(0))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    queued = asyncio.create_task(coalescer.submit(2))
    await asyncio.sleep(0)
    runner = coalescer._runner
    assert runner is not None
    runner.cancel()

    results = await asyncio.gather(running, queued, return_exceptions=True)

    assert [type(result) for result in results] == [asyncio.CancelledError] * 2
