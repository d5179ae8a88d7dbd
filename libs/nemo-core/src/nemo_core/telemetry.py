"""OpenTelemetry setup, once per process.

Spans are exported over OTLP/gRPC only when the standard variables ask for it
(``OTEL_TRACES_EXPORTER=otlp``, ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``OTEL_TRACES_EXPORTER=none`` wins); the exporter itself
reads the endpoint, headers and TLS variables. Propagation is the SDK default, W3C trace context
and baggage, which ``OTEL_PROPAGATORS`` can change.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

_provider: TracerProvider | None = None


def otlp_export_requested(environ: Mapping[str, str]) -> bool:
    """Whether the standard ``OTEL_*`` variables ask for OTLP trace export."""
    exporters = environ.get("OTEL_TRACES_EXPORTER")
    if exporters is not None:
        return "otlp" in {name.strip() for name in exporters.split(",")}
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def configure_telemetry(service_name: str) -> TracerProvider:
    """Install the process's tracer provider and asyncpg instrumentation; later calls reuse it.

    ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` override ``service_name`` as usual.
    """
    global _provider
    if _provider is not None:
        return _provider
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    if otlp_export_requested(os.environ):
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    # Query parameters can hold learner data, so they never go on spans.
    AsyncPGInstrumentor(capture_parameters=False).instrument(  # type: ignore[no-untyped-call]
        tracer_provider=provider
    )
    _provider = provider
    return provider


def attach_span_exporter(exporter: SpanExporter) -> None:
    """Also send every finished span to ``exporter``, synchronously (tests use an in-memory one)."""
    if _provider is None:
        raise RuntimeError("configure_telemetry() must run first")
    _provider.add_span_processor(SimpleSpanProcessor(exporter))
