"""A test-only service served by the real bootstrap, with well-known types as messages.

Run as ``python -m nemo_core_echo`` (from this directory) it is a service process like the real
ones: settings from ``NEMO_ECHO_*`` variables, JSON logs on stderr, graceful stop on SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from google.protobuf.wrappers_pb2 import StringValue
from pydantic_settings import SettingsConfigDict

from nemo_core.callers import CallerAcl, current_caller
from nemo_core.client import create_channel
from nemo_core.deadlines import downstream_timeout
from nemo_core.errors import ServiceError
from nemo_core.server import Server, Service, ServiceSetup, run_service
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY, ServiceSettings

SERVICE = "nemo.test.v1.Echo"
NAME = "echo"

TOKENS = {
    "gateway": "gateway-token-0123456789",
    "toolplane": "toolplane-token-0123456789",
    "stranger": "stranger-token-0123456789",
}

ACL = CallerAcl(
    {
        "gateway": {
            "Echo",
            "Fail",
            "Attempts",
            "Slow",
            "Remaining",
            "Relay",
            "Words",
            "Join",
            "Shout",
            "Refuse",
            "Peer",
        },
        "toolplane": {f"/{SERVICE}/Echo"},
    }
)


class EchoSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="NEMO_ECHO_")


@dataclass
class Running:
    """An echo server started in the test process."""

    server: Server
    settings: EchoSettings
    address: str
    attempts: Counter[str]


StartEcho = Callable[..., Awaitable[Running]]


def method(name: str) -> str:
    return f"/{SERVICE}/{name}"


def stub(
    channel: grpc.aio.Channel, name: str, response: type[Any] = StringValue
) -> grpc.aio.UnaryUnaryMultiCallable[StringValue, Any]:
    """A callable for the unary method ``name`` of the echo service."""
    return channel.unary_unary(
        method(name),
        request_serializer=StringValue.SerializeToString,
        response_deserializer=response.FromString,
    )


def token_of(identity: str) -> tuple[tuple[str, str]]:
    """Call metadata carrying the token of ``identity``."""
    return ((DEFAULT_CALLER_TOKEN_METADATA_KEY, TOKENS[identity]),)


def _unary(behavior: Any, response: type[Any] = StringValue) -> grpc.RpcMethodHandler[Any, Any]:
    return grpc.unary_unary_rpc_method_handler(
        behavior,
        request_deserializer=StringValue.FromString,
        response_serializer=response.SerializeToString,
    )


def build_setup(settings: ServiceSettings, attempts: Counter[str] | None = None) -> ServiceSetup:  # noqa: C901  one small nested handler per echo method
    """The echo service; ``attempts`` counts calls of ``Attempts`` per request value."""
    counts = attempts if attempts is not None else Counter()

    async def echo(request: StringValue, context: Any) -> StringValue:
        return StringValue(value=f"{current_caller()}:{request.value}")

    async def fail(request: StringValue, context: Any) -> StringValue:
        if request.value == "service":
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "ECHO_REFUSED",
                "the echo was refused",
                {"word": "hello"},
            )
        raise ValueError("secret internal detail")

    async def refuse(request: StringValue, context: Any) -> StringValue:
        # Echoes the caller's input into the error, as handlers naming a bad argument do.
        raise ServiceError(
            grpc.StatusCode.NOT_FOUND,
            "ECHO_UNKNOWN",
            f"nothing is known under {request.value}",
            {f"input_{index:02d}": request.value for index in range(40)},
        )

    async def peer(request: StringValue, context: Any) -> StringValue:
        return StringValue(value=context.peer())

    async def count_attempts(request: StringValue, context: Any) -> StringValue:
        counts[request.value] += 1
        if request.value == "unavailable-once" and counts[request.value] == 1:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, "ECHO_WARMING_UP", "try again")
        if request.value == "aborted":
            raise ServiceError(grpc.StatusCode.ABORTED, "ECHO_CONFLICT", "conflict")
        return StringValue(value=str(counts[request.value]))

    async def slow(request: StringValue, context: Any) -> StringValue:
        await asyncio.sleep(float(request.value))
        return StringValue(value="done")

    async def remaining(request: StringValue, context: Any) -> StringValue:
        # The caller's remaining time as grpc reports it, and what downstream calls would get.
        seen = {"time_remaining": context.time_remaining(), "downstream": downstream_timeout()}
        return StringValue(value=json.dumps(seen))

    async def relay(request: StringValue, context: Any) -> StringValue:
        target, _, word = request.value.partition("|")
        async with create_channel(target, settings) as channel:
            call = stub(channel, "Echo")
            reply: StringValue = await call(StringValue(value=word), timeout=downstream_timeout())
        return StringValue(value=f"relayed {reply.value}")

    async def words(request: StringValue, context: Any) -> AsyncIterator[StringValue]:
        for word in request.value.split():
            if word == "boom":
                raise ServiceError(grpc.StatusCode.DATA_LOSS, "ECHO_BOOM", "boom")
            yield StringValue(value=word)

    async def join(requests: AsyncIterator[StringValue], context: Any) -> StringValue:
        words = [request.value async for request in requests]
        return StringValue(value=f"{current_caller()}:{' '.join(words)}")

    async def shout(
        requests: AsyncIterator[StringValue], context: Any
    ) -> AsyncIterator[StringValue]:
        async for request in requests:
            yield StringValue(value=f"{current_caller()}:{request.value.upper()}")

    handlers = {
        "Echo": _unary(echo),
        "Fail": _unary(fail),
        "Refuse": _unary(refuse),
        "Peer": _unary(peer),
        "Attempts": _unary(count_attempts),
        "Slow": _unary(slow),
        "Remaining": _unary(remaining),
        "Relay": _unary(relay),
        "Words": grpc.unary_stream_rpc_method_handler(
            words,
            request_deserializer=StringValue.FromString,
            response_serializer=StringValue.SerializeToString,
        ),
        "Join": grpc.stream_unary_rpc_method_handler(
            join,
            request_deserializer=StringValue.FromString,
            response_serializer=StringValue.SerializeToString,
        ),
        "Shout": grpc.stream_stream_rpc_method_handler(
            shout,
            request_deserializer=StringValue.FromString,
            response_serializer=StringValue.SerializeToString,
        ),
    }
    return ServiceSetup(
        services=[Service.from_handlers(SERVICE, handlers)],
        acl=ACL,
        deadline_required={"Relay"},
    )


async def _build(settings: EchoSettings) -> ServiceSetup:
    return build_setup(settings)


if __name__ == "__main__":
    run_service(NAME, EchoSettings, _build)
