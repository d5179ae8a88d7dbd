"""The bootstrap: health, reflection, limits, lifecycle, and graceful stop of a real process."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from nemo_core_echo import (
    NAME,
    SERVICE,
    TOKENS,
    EchoSettings,
    Running,
    StartEcho,
    build_setup,
    method,
    stub,
    token_of,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from nemo_core.callers import CallerAcl, current_caller
from nemo_core.errors import error_details
from nemo_core.server import Server, Service, ServiceSetup, serve

TESTS_DIR = Path(__file__).parent
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def _health(address: str, service: str = "") -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=2
        )
    return int(reply.status)


async def test_health_serves_every_service(echo: Running) -> None:
    assert await _health(echo.address) == SERVING
    assert await _health(echo.address, SERVICE) == SERVING
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await _health(echo.address, "nemo.test.v1.Unknown")
    assert raised.value.code() is grpc.StatusCode.NOT_FOUND


async def test_health_turns_not_serving_as_soon_as_shutdown_starts(
    start_echo: StartEcho,
) -> None:
    running = await start_echo(drain_seconds=0.5)
    shutdown = asyncio.create_task(running.server.shutdown())
    await asyncio.sleep(0.1)
    assert await _health(running.address) == NOT_SERVING
    assert await _health(running.address, SERVICE) == NOT_SERVING
    await shutdown


def _reflected_services(address: str) -> tuple[list[str], str]:
    with grpc.insecure_channel(address) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = list(database.get_services())
        health_file = database.FindFileContainingSymbol("grpc.health.v1.Health").name
    return services, health_file


async def test_reflection_lists_services_without_a_token(echo: Running) -> None:
    services, health_file = await asyncio.to_thread(_reflected_services, echo.address)
    assert set(services) == {
        SERVICE,
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    }
    assert health_file.endswith("health/v1/health.proto")


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):
    async def Export(
        self, request: ExportTraceServiceRequest, context: object
    ) -> ExportTraceServiceResponse:
        return ExportTraceServiceResponse()


async def test_generated_servicer_is_guarded_and_reflected() -> None:
    settings = EchoSettings(caller_tokens=TOKENS)
    descriptor = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"]
    collector = Service.from_servicer(
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server, _Collector(), descriptor
    )
    setup = ServiceSetup(services=[collector], acl=CallerAcl({"gateway": {"Export"}}))
    server = Server(NAME, settings, setup)
    address = f"127.0.0.1:{await server.start()}"
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub_ = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
            export = stub_.Export
            await export(ExportTraceServiceRequest(), metadata=token_of("gateway"))
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await export(ExportTraceServiceRequest(), metadata=token_of("toolplane"))
            assert raised.value.code() is grpc.StatusCode.PERMISSION_DENIED
        with grpc.insecure_channel(address) as sync_channel:
            database = ProtoReflectionDescriptorDatabase(sync_channel)
            found = await asyncio.to_thread(database.FindFileContainingSymbol, descriptor.full_name)
        assert found.name == descriptor.file.name
    finally:
        await server.shutdown()


async def test_registered_method_handlers_are_guarded() -> None:
    # Current generated code registers methods this way as well as through a generic handler.
    async def echo_handler(request: StringValue, context: object) -> StringValue:
        return StringValue(value=f"{current_caller()}:{request.value}")

    settings = EchoSettings(caller_tokens=TOKENS)
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(
            echo_handler,
            request_deserializer=StringValue.FromString,
            response_serializer=StringValue.SerializeToString,
        )
    }
    registered = Service(
        full_name="nemo.test.v1.Registered",
        methods=("Echo",),
        register=lambda server: server.add_registered_method_handlers(
            "nemo.test.v1.Registered", handlers
        ),
    )
    server = Server(NAME, settings, ServiceSetup([registered], CallerAcl({"gateway": {"Echo"}})))
    address = f"127.0.0.1:{await server.start()}"
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            echo = channel.unary_unary(
                "/nemo.test.v1.Registered/Echo",
                request_serializer=StringValue.SerializeToString,
                response_deserializer=StringValue.FromString,
            )
            reply = await echo(StringValue(value="r"), metadata=token_of("gateway"))
            assert reply.value == "gateway:r"
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await echo(StringValue(value="r"))
            assert raised.value.code() is grpc.StatusCode.UNAUTHENTICATED
    finally:
        await server.shutdown()


async def test_a_saturated_server_refuses_calls_but_answers_probes(
    start_echo: StartEcho,
) -> None:
    limit = 2
    running = await start_echo(max_concurrent_rpcs=limit)
    async with grpc.aio.insecure_channel(running.address) as channel:
        slow = [
            asyncio.ensure_future(
                stub(channel, "Slow")(StringValue(value="1"), metadata=token_of("gateway"))
            )
            for _ in range(limit)
        ]
        await asyncio.sleep(0.3)
        # Readiness and liveness probes keep working, or every busy replica would be restarted.
        assert await _health(running.address) == SERVING
        services, _ = await asyncio.to_thread(_reflected_services, running.address)
        assert SERVICE in services
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Echo")(StringValue(value="hi"), metadata=token_of("gateway"))
        details = error_details(raised.value)
        assert (details.code, details.reason, details.domain) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "SERVER_BUSY",
            NAME,
        )
        assert [reply.value for reply in await asyncio.gather(*slow)] == ["done"] * limit
        reply = await stub(channel, "Echo")(StringValue(value="hi"), metadata=token_of("gateway"))
        assert reply.value == "gateway:hi"


async def test_finished_calls_free_their_place(start_echo: StartEcho) -> None:
    running = await start_echo(max_concurrent_rpcs=1)
    async with grpc.aio.insecure_channel(running.address) as channel:
        for value in ("service", "unexpected"):
            with pytest.raises(grpc.aio.AioRpcError):
                await stub(channel, "Fail")(StringValue(value=value), metadata=token_of("gateway"))
        words = channel.unary_stream(
            method("Words"),
            request_serializer=StringValue.SerializeToString,
            response_deserializer=StringValue.FromString,
        )
        streamed = words(StringValue(value="a b"), metadata=token_of("gateway"))
        assert [reply.value async for reply in streamed] == ["a", "b"]
        # A call its caller abandons frees its place too.
        abandoned = stub(channel, "Slow")(StringValue(value="30"), metadata=token_of("gateway"))
        await asyncio.sleep(0.2)
        abandoned.cancel()
        await asyncio.sleep(0.2)
        reply = await stub(channel, "Echo")(StringValue(value="hi"), metadata=token_of("gateway"))
    assert reply.value == "gateway:hi"


async def test_server_enforces_its_receive_limit(start_echo: StartEcho) -> None:
    running = await start_echo(max_receive_message_bytes=1024)
    async with grpc.aio.insecure_channel(running.address) as channel:
        echo = stub(channel, "Echo")
        assert (await echo(StringValue(value="x" * 900), metadata=token_of("gateway"))).value
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await echo(StringValue(value="x" * 2048), metadata=token_of("gateway"))
    assert raised.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize(
    ("acl", "deadline_required"),
    [
        (CallerAcl({"gateway": {"Ecoh"}}), set()),
        (CallerAcl({"gateway": {"/nemo.test.v1.Other/Echo"}}), set()),
        (CallerAcl({"gateway": {"Echo"}}), {"Rely"}),
    ],
)
async def test_unknown_method_names_fail_at_start(
    acl: CallerAcl, deadline_required: set[str]
) -> None:
    settings = EchoSettings(caller_tokens=TOKENS)
    setup = dataclasses.replace(build_setup(settings), acl=acl, deadline_required=deadline_required)
    with pytest.raises(ValueError, match="nobody serves"):
        await Server(NAME, settings, setup).start()


async def test_background_tasks_and_cleanup_hooks_run_in_order() -> None:
    events: list[str] = []

    async def background(stopping: asyncio.Event) -> None:
        events.append("background started")
        await stopping.wait()
        events.append("background stopped")

    async def close_pool() -> None:
        events.append("pool closed")

    async def flush_queue() -> None:
        events.append("queue flushed")

    settings = EchoSettings(caller_tokens=TOKENS, grace_period_seconds=1)
    setup = dataclasses.replace(
        build_setup(settings), background=[background], cleanup=[close_pool, flush_queue]
    )
    server = Server(NAME, settings, setup)
    await server.start()
    await asyncio.sleep(0)
    await server.shutdown()
    await server.shutdown()  # a second call must not run anything twice
    assert events == ["background started", "background stopped", "queue flushed", "pool closed"]
    assert not server.failed


async def test_background_task_ignoring_stop_is_cancelled_after_grace() -> None:
    async def stubborn(stopping: asyncio.Event) -> None:
        await asyncio.sleep(60)

    settings = EchoSettings(caller_tokens=TOKENS, grace_period_seconds=0.2)
    server = Server(
        NAME, settings, dataclasses.replace(build_setup(settings), background=[stubborn])
    )
    await server.start()
    started = time.monotonic()
    await server.shutdown()
    assert time.monotonic() - started < 2


async def test_failing_background_task_stops_the_service() -> None:
    async def crashing(stopping: asyncio.Event) -> None:
        raise RuntimeError("http server could not bind")

    settings = EchoSettings(caller_tokens=TOKENS, grace_period_seconds=0.2)
    server = Server(
        NAME, settings, dataclasses.replace(build_setup(settings), background=[crashing])
    )
    await asyncio.wait_for(serve(server), timeout=5)
    assert server.failed


async def test_failing_cleanup_hook_does_not_skip_the_others() -> None:
    closed: list[str] = []

    async def broken() -> None:
        raise OSError("flush failed")

    async def close_pool() -> None:
        closed.append("pool")

    settings = EchoSettings(caller_tokens=TOKENS)
    server = Server(
        NAME, settings, dataclasses.replace(build_setup(settings), cleanup=[close_pool, broken])
    )
    await server.start()
    await server.shutdown()
    assert closed == ["pool"]
    assert server.failed


# The service as a separate process, stopped by a signal.


@dataclasses.dataclass
class Process:
    proc: asyncio.subprocess.Process
    address: str
    logs: list[dict[str, object]]
    reader: asyncio.Task[None]


async def _start_process(**env: str) -> Process:
    variables = {
        "NEMO_ECHO_CALLER_TOKENS": json.dumps(TOKENS),
        "NEMO_ECHO_LISTEN_ADDRESS": "127.0.0.1:0",
        **env,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nemo_core_echo",
        cwd=TESTS_DIR,
        env=os.environ | variables,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    logs: list[dict[str, object]] = []
    port_found: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def read_logs(stream: asyncio.StreamReader) -> None:
        async for line in stream:
            if not line.startswith(b"{"):
                continue  # grpc's C core logs plain text
            entry = json.loads(line)
            logs.append(entry)
            if entry["message"] == "serving" and not port_found.done():
                port_found.set_result(int(entry["port"]))
        if not port_found.done():
            port_found.set_exception(RuntimeError(f"process ended before serving: {logs}"))

    reader = asyncio.create_task(read_logs(proc.stderr))
    port = await asyncio.wait_for(port_found, timeout=20)
    return Process(proc, f"127.0.0.1:{port}", logs, reader)


@pytest.fixture
async def processes() -> AsyncIterator[list[Process]]:
    """Echo service processes started by a test; killed afterwards if still running."""
    started: list[Process] = []
    yield started
    for process in started:
        if process.proc.returncode is None:
            process.proc.kill()
            await process.proc.wait()
        await process.reader


async def test_sigterm_completes_in_flight_rpcs_and_exits_within_grace(
    processes: list[Process],
) -> None:
    drain, grace = 1.0, 5.0
    process = await _start_process(
        NEMO_ECHO_DRAIN_SECONDS=str(drain), NEMO_ECHO_GRACE_PERIOD_SECONDS=str(grace)
    )
    processes.append(process)
    async with grpc.aio.insecure_channel(process.address) as channel:
        echo = stub(channel, "Echo")
        in_flight = asyncio.ensure_future(
            stub(channel, "Slow")(StringValue(value="3"), metadata=token_of("gateway"), timeout=20)
        )
        await asyncio.sleep(0.3)
        signalled = time.monotonic()
        process.proc.send_signal(signal.SIGTERM)

        # Drain window: health says NOT_SERVING while new RPCs are still served.
        await asyncio.sleep(0.2)
        assert await _health(process.address) == NOT_SERVING
        reply = await echo(StringValue(value="drain"), metadata=token_of("gateway"), timeout=2)
        assert reply.value == "gateway:drain"

        # After the drain: new RPCs are refused while the in-flight one finishes.
        await asyncio.sleep(drain - (time.monotonic() - signalled) + 0.3)
        assert not in_flight.done()
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await echo(StringValue(value="late"), metadata=token_of("gateway"), timeout=2)
        assert raised.value.code() is grpc.StatusCode.UNAVAILABLE

        assert (await in_flight).value == "done"
    returncode = await asyncio.wait_for(process.proc.wait(), timeout=drain + grace + 5)
    elapsed = time.monotonic() - signalled
    assert returncode == 0
    assert elapsed < drain + grace
    await process.reader
    messages = [entry["message"] for entry in process.logs]
    assert messages[-2:] == ["shutting down", "stopped"]


async def test_sigint_stops_an_idle_service_promptly(processes: list[Process]) -> None:
    process = await _start_process(NEMO_ECHO_GRACE_PERIOD_SECONDS="10")
    processes.append(process)
    signalled = time.monotonic()
    process.proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(process.proc.wait(), timeout=10) == 0
    assert time.monotonic() - signalled < 3


async def test_startup_failure_exits_non_zero(echo: Running) -> None:
    # The port is taken by the in-process echo server: binding must fail, not share it.
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nemo_core_echo",
        cwd=TESTS_DIR,
        env=os.environ | {"NEMO_ECHO_LISTEN_ADDRESS": echo.address},
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout=20)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 1
    # grpc's C core writes its own plain-text line about the bind error next to our JSON.
    lines = [line for line in stderr.decode().splitlines() if line.startswith("{")]
    failures = [entry for entry in map(json.loads, lines) if entry["message"] == "service failed"]
    assert failures
    assert "Failed to bind" in str(failures[0]["exception"])
