"""Channels to other services: caller token, retries only on UNAVAILABLE, message limits, calls
balanced over every replica."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from hypothesis import given
from hypothesis import strategies as st
from nemo_core_echo import TOKENS, EchoSettings, Running, StartEcho, method, stub
from pydantic import SecretStr

from nemo_core.client import RETRY_MAX_ATTEMPTS, SERVICE_CONFIG, channel_target, create_channel
from nemo_core.errors import error_details


def _client_settings(**values: object) -> EchoSettings:
    return EchoSettings(client_token=SecretStr(TOKENS["gateway"]), **values)  # type: ignore[arg-type]


async def test_channel_sends_the_client_token(echo: Running) -> None:
    async with create_channel(echo.address, _client_settings()) as channel:
        reply = await stub(channel, "Echo")(StringValue(value="hi"))
    assert reply.value == "gateway:hi"


async def test_explicit_token_wins(echo: Running) -> None:
    token = SecretStr(TOKENS["toolplane"])
    async with create_channel(echo.address, _client_settings(), token=token) as channel:
        reply = await stub(channel, "Echo")(StringValue(value="hi"))
    assert reply.value == "toolplane:hi"


def _words(*words: str) -> AsyncIterator[StringValue]:
    async def generate() -> AsyncIterator[StringValue]:
        for word in words:
            yield StringValue(value=word)

    return generate()


async def test_token_is_sent_on_every_kind_of_call(echo: Running) -> None:
    encode, decode = StringValue.SerializeToString, StringValue.FromString
    async with create_channel(echo.address, _client_settings()) as channel:
        words = channel.unary_stream(method("Words"), encode, decode)
        join = channel.stream_unary(method("Join"), encode, decode)
        shout = channel.stream_stream(method("Shout"), encode, decode)
        assert [r.value async for r in words(StringValue(value="a b"))] == ["a", "b"]
        assert (await join(_words("a", "b"))).value == "gateway:a b"
        assert [r.value async for r in shout(_words("a", "b"))] == ["gateway:A", "gateway:B"]


async def test_channel_without_token_is_unauthenticated(echo: Running) -> None:
    async with create_channel(echo.address, EchoSettings()) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Echo")(StringValue(value="hi"))
    assert raised.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_unavailable_is_retried(echo: Running) -> None:
    async with create_channel(echo.address, _client_settings()) as channel:
        reply = await stub(channel, "Attempts")(StringValue(value="unavailable-once"), timeout=5)
    assert reply.value == "2"
    assert echo.attempts["unavailable-once"] == 2


async def test_other_codes_are_not_retried(echo: Running) -> None:
    async with create_channel(echo.address, _client_settings()) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Attempts")(StringValue(value="aborted"), timeout=5)
    assert error_details(raised.value).reason == "ECHO_CONFLICT"
    assert echo.attempts["aborted"] == 1


def test_service_config_retries_only_unavailable() -> None:
    (config,) = json.loads(SERVICE_CONFIG)["methodConfig"]
    assert config["name"] == [{}]
    assert config["waitForReady"] is False
    assert config["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]
    assert config["retryPolicy"]["maxAttempts"] == RETRY_MAX_ATTEMPTS
    assert json.loads(SERVICE_CONFIG)["retryThrottling"]["maxTokens"] > 0


async def test_unreachable_service_fails_fast(echo: Running) -> None:
    # A port nothing listens on: waitForReady false means UNAVAILABLE, not a wait for the deadline.
    await echo.server.shutdown()
    async with create_channel(echo.address, _client_settings()) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Echo")(StringValue(value="hi"), timeout=20)
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE


async def test_client_enforces_its_receive_limit(start_echo: StartEcho) -> None:
    running = await start_echo()
    settings = _client_settings(max_receive_message_bytes=1024)
    async with create_channel(running.address, settings) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Echo")(StringValue(value="x" * 4096))
    assert raised.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_calls_are_balanced_over_every_address_of_a_list(start_echo: StartEcho) -> None:
    replicas = [await start_echo(), await start_echo()]
    target = ",".join(replica.address for replica in replicas)
    async with create_channel(target, _client_settings()) as channel:
        await channel.channel_ready()
        for _ in range(40):
            await stub(channel, "Attempts")(StringValue(value="spread"), timeout=5)
    counts = [replica.attempts["spread"] for replica in replicas]
    assert sum(counts) == 40
    # Round robin: once both are connected, calls alternate.
    assert min(counts) >= 15, counts


async def test_calls_go_on_while_one_address_of_a_list_is_down(start_echo: StartEcho) -> None:
    replicas = [await start_echo(), await start_echo()]
    target = ",".join(replica.address for replica in replicas)
    async with create_channel(target, _client_settings()) as channel:
        await stub(channel, "Echo")(StringValue(value="warm"), timeout=5)
        await replicas[0].server.shutdown()
        replies = [
            await stub(channel, "Attempts")(StringValue(value="after"), timeout=5)
            for _ in range(10)
        ]
    assert len(replies) == 10
    assert replicas[1].attempts["after"] == 10


_PORTS = st.integers(1, 65535)
_IPV4 = st.ip_addresses(v=4).map(str)
_IPV6 = st.ip_addresses(v=6).map(lambda address: f"[{address}]")


@given(
    hosts=st.one_of(
        st.lists(st.tuples(_IPV4, _PORTS), min_size=2, max_size=4),
        st.lists(st.tuples(_IPV6, _PORTS), min_size=2, max_size=4),
    )
)
def test_a_list_of_ip_addresses_is_one_balanced_target(hosts: list[tuple[str, int]]) -> None:
    addresses = [f"{host}:{port}" for host, port in hosts]
    scheme = "ipv6" if hosts[0][0].startswith("[") else "ipv4"
    assert channel_target(",".join(addresses)) == f"{scheme}:{','.join(addresses)}"


@pytest.mark.parametrize(
    "address",
    [
        "context-a:50051,context-b:50051",  # names: a list would need a resolver of its own
        "127.0.0.1:50051,[::1]:50051",  # two families
        "127.0.0.1,127.0.0.1:50051",  # no port
        "127.0.0.1:0,127.0.0.1:50051",  # port out of range
        "127.0.0.1:50051,",  # an empty entry
    ],
)
def test_a_list_that_is_no_target_is_refused(address: str) -> None:
    with pytest.raises(ValueError, match="address"):
        channel_target(address)


@pytest.mark.parametrize(
    "address", ["127.0.0.1:50051", "nemo-context:50051", "dns:///nemo-context-pods:50051"]
)
def test_single_addresses_and_resolver_targets_are_kept(address: str) -> None:
    assert channel_target(address) == address
