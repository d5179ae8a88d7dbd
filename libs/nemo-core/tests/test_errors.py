"""The error model on the wire: ErrorInfo for service errors, nothing internal for the rest."""

from __future__ import annotations

import logging

import grpc
import grpc.aio
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from google.rpc import error_details_pb2, status_pb2
from nemo_core_echo import NAME, Running, StartEcho, method, stub, token_of

from nemo_core.errors import (
    MAX_MESSAGE_BYTES,
    MAX_METADATA_ENTRIES,
    MAX_METADATA_VALUE_BYTES,
    ServiceError,
    error_details,
)

SECRET = "secret internal detail"


async def _fail(address: str, value: str) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Fail")(StringValue(value=value), metadata=token_of("gateway"))
    return raised.value


async def test_service_error_reaches_the_caller_exactly(echo: Running) -> None:
    details = error_details(await _fail(echo.address, "service"))
    assert details.code is grpc.StatusCode.FAILED_PRECONDITION
    assert details.message == "the echo was refused"
    assert details.reason == "ECHO_REFUSED"
    assert details.domain == NAME
    assert details.metadata == {"word": "hello"}


async def test_status_details_are_a_google_rpc_status(echo: Running) -> None:
    error = await _fail(echo.address, "service")
    raw = dict(error.trailing_metadata() or ())["grpc-status-details-bin"]
    assert isinstance(raw, bytes)
    status = status_pb2.Status.FromString(raw)
    assert status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    info = error_details_pb2.ErrorInfo()
    assert len(status.details) == 1
    assert status.details[0].Unpack(info)
    assert (info.reason, info.domain) == ("ECHO_REFUSED", NAME)


async def test_unexpected_exception_is_internal_without_detail(
    echo: Running, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="nemo_core"):
        error = await _fail(echo.address, "unexpected")
    details = error_details(error)
    assert details.code is grpc.StatusCode.INTERNAL
    assert details.reason == "INTERNAL"
    assert details.domain == NAME
    wire = [str(error), error.details() or "", repr(error.trailing_metadata())]
    wire += [repr(value) for _, value in error.trailing_metadata() or ()]
    assert not [text for text in wire if SECRET in text or "ValueError" in text]
    # The operator still gets the traceback.
    logged = [r for r in caplog.records if r.exc_info and SECRET in str(r.exc_info[1])]
    assert logged, "the unexpected exception was not logged with its traceback"


async def test_error_in_a_stream_carries_error_info(echo: Running) -> None:
    async with grpc.aio.insecure_channel(echo.address) as channel:
        words = channel.unary_stream(
            method("Words"),
            request_serializer=StringValue.SerializeToString,
            response_deserializer=StringValue.FromString,
        )
        received: list[str] = []

        async def read_all() -> None:
            async for reply in words(StringValue(value="a b boom c"), metadata=token_of("gateway")):
                received.append(reply.value)

        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await read_all()
    assert received == ["a", "b"]
    details = error_details(raised.value)
    assert (details.code, details.reason, details.domain) == (
        grpc.StatusCode.DATA_LOSS,
        "ECHO_BOOM",
        NAME,
    )


async def test_stream_without_error_completes(echo: Running) -> None:
    async with grpc.aio.insecure_channel(echo.address) as channel:
        words = channel.unary_stream(
            method("Words"),
            request_serializer=StringValue.SerializeToString,
            response_deserializer=StringValue.FromString,
        )
        replies = [
            r.value async for r in words(StringValue(value="a b"), metadata=token_of("gateway"))
        ]
    assert replies == ["a", "b"]


def test_error_details_without_rich_status() -> None:
    error = grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "down"
    )
    details = error_details(error)
    assert (details.code, details.message, details.reason, details.domain) == (
        grpc.StatusCode.UNAVAILABLE,
        "down",
        None,
        None,
    )


def test_error_details_distrusts_contradicting_trailers() -> None:
    status = ServiceError(grpc.StatusCode.NOT_FOUND, "THING_NOT_FOUND", "no thing").to_status("x")
    error = grpc.aio.AioRpcError(
        grpc.StatusCode.INTERNAL,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(*status.trailing_metadata),
        "something else",
    )
    assert error_details(error).reason is None


@pytest.mark.parametrize("reason", ["lower_case", "TRAILING_", "WITH-DASH", "", "X"])
def test_reason_must_be_upper_snake(reason: str) -> None:
    with pytest.raises(ValueError, match="UPPER_SNAKE"):
        ServiceError(grpc.StatusCode.NOT_FOUND, reason, "message")


def test_service_error_cannot_be_ok() -> None:
    with pytest.raises(ValueError, match="OK"):
        ServiceError(grpc.StatusCode.OK, "FINE", "fine")


async def test_unavailable_dependency_is_reported_without_its_details(
    start_echo: StartEcho,
) -> None:
    relay = await start_echo(client_token="gateway-token-0123456789")
    gone = await start_echo()
    await gone.server.shutdown()
    async with grpc.aio.insecure_channel(relay.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Relay")(
                StringValue(value=f"{gone.address}|hi"), metadata=token_of("gateway"), timeout=10
            )
    details = error_details(raised.value)
    assert (details.code, details.reason, details.domain) == (
        grpc.StatusCode.UNAVAILABLE,
        "DEPENDENCY_UNAVAILABLE",
        NAME,
    )
    assert gone.address.rsplit(":", 1)[1] not in (raised.value.details() or "")


@pytest.mark.parametrize("echoed", ["x" * 20_000, "\U0001f600" * 20_000, "ả" * 300])
async def test_an_error_echoing_long_input_still_reaches_the_caller(
    echo: Running, echoed: str
) -> None:
    # Past gRPC's metadata limits the caller would get a bare RESOURCE_EXHAUSTED instead.
    async with grpc.aio.insecure_channel(echo.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Refuse")(StringValue(value=echoed), metadata=token_of("gateway"))
    details = error_details(raised.value)
    assert (details.code, details.reason, details.domain) == (
        grpc.StatusCode.NOT_FOUND,
        "ECHO_UNKNOWN",
        NAME,
    )
    assert details.message.startswith("nothing is known under ")
    assert len(details.message.encode()) <= MAX_MESSAGE_BYTES
    assert len(details.metadata) == MAX_METADATA_ENTRIES
    for value in details.metadata.values():
        assert len(value.encode()) <= MAX_METADATA_VALUE_BYTES
        assert echoed.startswith(value.removesuffix("…"))
        assert value.endswith("…") == (len(echoed.encode()) > MAX_METADATA_VALUE_BYTES)
    trailers = raised.value.trailing_metadata() or ()
    assert sum(len(key) + len(value) for key, value in trailers) < 8 * 1024


def test_short_errors_are_sent_unchanged() -> None:
    status = ServiceError(
        grpc.StatusCode.NOT_FOUND, "THING_NOT_FOUND", "no thing", {"thing": "t" * 200}
    ).to_status("x")
    raw = dict(status.trailing_metadata)["grpc-status-details-bin"]
    info = error_details_pb2.ErrorInfo()
    assert status_pb2.Status.FromString(raw).details[0].Unpack(info)
    assert (status.details, dict(info.metadata)) == ("no thing", {"thing": "t" * 200})
