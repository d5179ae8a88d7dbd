"""A request body that does not parse is the caller's error, reported after authentication."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest
from nemo_core_echo import NAME, Running, method, token_of

from nemo_core.errors import error_details

#: StringValue{value: b"\xff\xfe"}: a string field holding invalid UTF-8.
INVALID_UTF8 = b"\x0a\x02\xff\xfe"


async def _send_raw(running: Running, body: bytes, metadata: tuple[tuple[str, str], ...]) -> None:
    async with grpc.aio.insecure_channel(running.address) as channel:
        raw: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(method("Echo"))
        await raw(body, metadata=metadata, timeout=5)


@pytest.mark.parametrize("body", [INVALID_UTF8, b"\xff\xff\xff\xff"], ids=["utf8", "garbage"])
async def test_unparsable_request_is_invalid_argument(echo: Running, body: bytes) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await _send_raw(echo, body, token_of("gateway"))
    details = error_details(raised.value)
    assert (details.code, details.reason, details.domain) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "MALFORMED_REQUEST",
        NAME,
    )
    assert "DecodeError" not in details.message


async def test_unparsable_request_of_an_unknown_caller_is_unauthenticated(echo: Running) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await _send_raw(echo, INVALID_UTF8, ())
    assert error_details(raised.value).reason == "CALLER_UNAUTHENTICATED"
