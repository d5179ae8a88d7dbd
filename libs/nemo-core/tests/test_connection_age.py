"""Connections are recycled: the server sends GOAWAY at max_connection_age, the project's channel
reconnects without failing a call, and behind a connection balancer new replicas get traffic."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from google.protobuf.wrappers_pb2 import StringValue
from nemo_core_echo import TOKENS, EchoSettings, Running, StartEcho, stub
from pydantic import SecretStr

from nemo_core.client import create_channel

AGE_SECONDS = 0.5
CLIENT = EchoSettings(client_token=SecretStr(TOKENS["gateway"]))


async def _start(start_echo: StartEcho) -> Running:
    return await start_echo(max_connection_age_seconds=AGE_SECONDS, grace_period_seconds=0.2)


async def test_calls_keep_succeeding_across_connection_age(start_echo: StartEcho) -> None:
    running = await _start(start_echo)
    peers: Counter[str] = Counter()
    async with create_channel(running.address, CLIENT) as channel:
        # A call running while its connection reaches its age finishes on it, however much
        # longer than the shutdown grace it takes.
        slow = asyncio.ensure_future(stub(channel, "Slow")(StringValue(value="1.5"), timeout=10))
        for _ in range(100):  # about 3 seconds: several ages
            reply = await stub(channel, "Peer")(StringValue(), timeout=5)
            peers[reply.value] += 1
            await asyncio.sleep(0.03)
        assert (await slow).value == "done"
    # Each peer is one client connection (its local port): the channel reconnected on its own.
    assert len(peers) >= 3, peers


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


@asynccontextmanager
async def _connection_balancer(backends: list[Running]) -> AsyncIterator[tuple[str, Counter[str]]]:
    """A TCP proxy that picks a backend per connection, as a Kubernetes ClusterIP Service does;
    yields its address and the connections each backend received."""
    choice = itertools.cycle(backends)
    received: Counter[str] = Counter()
    tasks: set[asyncio.Future[tuple[None, None]]] = set()

    async def handle(
        client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        backend = next(choice)
        received[backend.address] += 1
        host, port = backend.address.rsplit(":", 1)
        backend_reader, backend_writer = await asyncio.open_connection(host, int(port))
        task = asyncio.ensure_future(
            asyncio.gather(
                _pipe(client_reader, backend_writer), _pipe(backend_reader, client_writer)
            )
        )
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    proxy = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{proxy.sockets[0].getsockname()[1]}", received
    finally:
        proxy.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_new_replica_behind_a_connection_balancer_gets_calls(
    start_echo: StartEcho,
) -> None:
    old, new = await _start(start_echo), await _start(start_echo)
    async with (
        _connection_balancer([old, new]) as (address, connections),
        create_channel(address, CLIENT) as channel,
    ):
        for _ in range(100):
            reply = await stub(channel, "Echo")(StringValue(value="x"), timeout=5)
            assert reply.value == "gateway:x"
            await asyncio.sleep(0.03)
    assert connections[new.address] >= 1, connections
    assert connections[old.address] >= 1, connections
