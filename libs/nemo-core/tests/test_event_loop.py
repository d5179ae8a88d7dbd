import asyncio

import pytest

from nemo_core import event_loop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_services_run_on_uvloop_where_it_is_installed() -> None:
    assert event_loop.run(_loop_module()).startswith("uvloop")


def test_run_returns_the_result_and_closes_its_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def answer() -> int:
        loops.append(asyncio.get_running_loop())
        return 42

    assert event_loop.run(answer()) == 42
    assert loops[0].is_closed()


def test_run_raises_what_the_coroutine_raises() -> None:
    async def fail() -> None:
        raise LookupError("no such learner")

    with pytest.raises(LookupError):
        event_loop.run(fail())
