"""Tracing: one trace across two services, no spans for health, OTLP only when asked for."""

from __future__ import annotations

import asyncpg
import grpc
import grpc.aio
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from grpc_health.v1 import health_pb2, health_pb2_grpc
from nemo_core_echo import SERVICE, TOKENS, EchoSettings, StartEcho, stub
from opentelemetry import metrics
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from nemo_core.client import create_channel
from nemo_core.db import connect, learner_transaction
from nemo_core.telemetry import (
    attach_metric_reader,
    configure_telemetry,
    otlp_export_requested,
)


def _ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    chain: list[ReadableSpan] = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        chain.append(span)
    return chain


async def test_one_trace_across_two_services(
    start_echo: StartEcho, spans: InMemorySpanExporter
) -> None:
    # Service A relays to service B through create_channel, presenting its own client token.
    service_a = await start_echo(client_token=TOKENS["gateway"])
    service_b = await start_echo()
    spans.clear()
    client_settings = EchoSettings(client_token=TOKENS["gateway"])
    async with create_channel(service_a.address, client_settings) as channel:
        reply = await stub(channel, "Relay")(
            StringValue(value=f"{service_b.address}|hi"), timeout=5
        )
    assert reply.value == "relayed gateway:hi"

    finished = [s for s in spans.get_finished_spans() if s.name.startswith(f"/{SERVICE}/")]
    kinds = sorted((s.name.rsplit("/", 1)[1], s.kind.name) for s in finished)
    assert kinds == [
        ("Echo", "CLIENT"),
        ("Echo", "SERVER"),
        ("Relay", "CLIENT"),
        ("Relay", "SERVER"),
    ]
    assert len({s.context.trace_id for s in finished}) == 1

    by_id = {s.context.span_id: s for s in finished}
    (server_a,) = [s for s in finished if s.kind is SpanKind.SERVER and s.name.endswith("Relay")]
    (server_b,) = [s for s in finished if s.kind is SpanKind.SERVER and s.name.endswith("Echo")]
    (caller,) = [s for s in finished if s.kind is SpanKind.CLIENT and s.name.endswith("Relay")]
    assert server_a in _ancestors(server_b, by_id)
    assert _ancestors(server_b, by_id)[-1] is caller


async def test_health_checks_are_not_traced(
    start_echo: StartEcho, spans: InMemorySpanExporter
) -> None:
    running = await start_echo()
    spans.clear()
    async with grpc.aio.insecure_channel(running.address) as channel:
        await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert not [s for s in spans.get_finished_spans() if "grpc.health" in s.name]


def test_configure_telemetry_is_idempotent(spans: InMemorySpanExporter) -> None:
    assert configure_telemetry("other-name") is configure_telemetry("nemo-core-tests")


async def test_asyncpg_spans_carry_no_query_parameters(
    spans: InMemorySpanExporter, owner_dsn: str
) -> None:
    secret = "L-PARAMETER-THAT-MUST-NOT-BE-TRACED"
    conn = await connect(owner_dsn)
    try:
        spans.clear()
        assert await conn.fetchval("SELECT $1::text", secret) == secret
    finally:
        await conn.close()
    queries = [
        s for s in spans.get_finished_spans() if "SELECT $1::text" in str(s.attributes or {})
    ]
    assert queries, "the asyncpg query was not traced"
    for span in queries:
        attributes = dict(span.attributes or {})
        assert not [key for key in attributes if "parameters" in key]
        assert secret not in str(attributes)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console, otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, False),
    ],
)
def test_otlp_export_follows_standard_variables(environ: dict[str, str], expected: bool) -> None:
    assert otlp_export_requested(environ) is expected


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, True),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://collector:4317"}, True),
        # A traces-only endpoint or exporter choice says nothing about metrics.
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, False),
        ({"OTEL_METRICS_EXPORTER": "otlp"}, True),
        ({"OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, False),
    ],
)
def test_metric_export_follows_standard_variables(environ: dict[str, str], expected: bool) -> None:
    assert otlp_export_requested(environ, "metrics") is expected


def test_counters_reach_an_attached_reader(spans: InMemorySpanExporter) -> None:
    counter = metrics.get_meter("nemo_core.tests").create_counter("nemo.tests.events")
    reader = InMemoryMetricReader()
    attach_metric_reader(reader)
    counter.add(2, {"kind": "a"})
    counter.add(3, {"kind": "b"})
    counter.add(1, {"kind": "a"})
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        str((point.attributes or {})["kind"]): point.value
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "nemo.tests.events"
        for point in metric.data.data_points
        if isinstance(point, NumberDataPoint)
    }
    assert points == {"a": 3, "b": 3}


async def test_a_learner_transaction_traces_its_statements_not_its_control(
    spans: InMemorySpanExporter, owner_dsn: str
) -> None:
    conn = await connect(owner_dsn)
    try:
        spans.clear()
        async with learner_transaction(conn, ["L-2041-1"], readonly=True):
            setting = await conn.fetchval("SELECT current_setting('nemo.learner_ids')")
        assert setting == "L-2041-1"
        # After the transaction, statements are traced again.
        assert await conn.fetchval("SELECT 2") == 2
    finally:
        await conn.close()
    statements = [
        str((s.attributes or {}).get("db.statement", "")) for s in spans.get_finished_spans()
    ]
    assert statements == ["SELECT current_setting('nemo.learner_ids')", "SELECT 2"]


async def test_a_failed_statement_leaves_no_error_message_on_its_span(
    spans: InMemorySpanExporter, owner_dsn: str
) -> None:
    secret = "L-PARAMETER-THAT-MUST-NOT-BE-TRACED"
    conn = await connect(owner_dsn)
    try:
        spans.clear()
        # PostgreSQL quotes the value it could not read in its error message.
        with pytest.raises(asyncpg.DataError, match=secret):
            await conn.fetchval("SELECT $1::text::uuid", secret)
    finally:
        await conn.close()
    [failed] = [s for s in spans.get_finished_spans() if "::uuid" in str(s.attributes or {})]
    assert failed.status.status_code is StatusCode.ERROR
    assert secret not in str(failed.status.description)
    assert secret not in repr(
        [(event.name, dict(event.attributes or {})) for event in failed.events]
    )
