"""Deadlines: required on fan-out methods, visible to handlers, never leaking between RPCs."""

from __future__ import annotations

import asyncio
import json

import grpc
import grpc.aio
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from nemo_core_echo import Running, stub, token_of

from nemo_core.deadlines import DEFAULT_MARGIN_SECONDS, downstream_timeout, set_time_remaining
from nemo_core.errors import ServiceError, error_details


async def test_fan_out_method_without_deadline_is_rejected(echo: Running) -> None:
    async with grpc.aio.insecure_channel(echo.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Relay")(
                StringValue(value=f"{echo.address}|x"), metadata=token_of("gateway")
            )
    details = error_details(raised.value)
    assert details.code is grpc.StatusCode.INVALID_ARGUMENT
    assert details.reason == "DEADLINE_REQUIRED"


async def _remaining(channel: grpc.aio.Channel, seconds: float | None) -> dict[str, float | None]:
    reply = await stub(channel, "Remaining")(
        StringValue(), metadata=token_of("gateway"), timeout=seconds
    )
    seen: dict[str, float | None] = json.loads(reply.value)
    return seen


async def test_downstream_calls_get_less_than_the_caller_has_left(echo: Running) -> None:
    async with grpc.aio.insecure_channel(echo.address) as channel:
        seen = await _remaining(channel, 5)
        left, downstream = seen["time_remaining"], seen["downstream"]
        assert left is not None
        assert downstream is not None
        # grpc rounds the timeout header up a little, and its clock is not time.monotonic(),
        # hence the small allowances.
        assert 2.0 < left <= 5.1
        assert 0 < downstream <= left - DEFAULT_MARGIN_SECONDS + 0.001
        # A later call without a deadline sees none: nothing is left over from the first call.
        assert await _remaining(channel, None) == {
            "time_remaining": None,
            "downstream": None,
        }


async def test_concurrent_calls_keep_their_own_deadlines(echo: Running) -> None:
    async with grpc.aio.insecure_channel(echo.address) as channel:
        seen = await asyncio.gather(*(_remaining(channel, timeout) for timeout in (2, 8, 2, 8)))
    downstream = [s["downstream"] or 0.0 for s in seen]
    assert all(0 < value < 2.1 for value in downstream[::2])
    assert all(2.1 < value < 8.1 for value in downstream[1::2])


async def test_downstream_timeout_outside_rpc_is_none() -> None:
    async def outside() -> float | None:
        return downstream_timeout()

    assert await asyncio.create_task(outside()) is None


async def test_exhausted_deadline_refuses_downstream_calls() -> None:
    async def nearly_out_of_time() -> float | None:
        set_time_remaining(0.01)
        return downstream_timeout()

    with pytest.raises(ServiceError) as raised:
        await asyncio.create_task(nearly_out_of_time())
    assert raised.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
