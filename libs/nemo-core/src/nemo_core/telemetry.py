"""OpenTelemetry setup, once per process: traces and metrics.

Spans are exported over OTLP/gRPC only when the standard variables ask for it
(``OTEL_TRACES_EXPORTER=otlp``, ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``OTEL_TRACES_EXPORTER=none`` wins); the exporter itself
reads the endpoint, headers and TLS variables. Metrics follow the same rule with
``OTEL_METRICS_EXPORTER`` and ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``, exported every
``OTEL_METRIC_EXPORT_INTERVAL`` milliseconds. Propagation is the SDK default, W3C trace context
and baggage, which ``OTEL_PROPAGATORS`` can change.

Code that counts creates its instruments from ``opentelemetry.metrics.get_meter(...)`` at import
time; the API forwards them to the provider installed here once it exists.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Literal

from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.util.types import Attributes

_provider: TracerProvider | None = None
_meter_provider: MeterProvider | None = None
_instrumentations: list[Callable[[TracerProvider], None]] = []

Signal = Literal["traces", "metrics"]


def otlp_export_requested(environ: Mapping[str, str], signal: Signal = "traces") -> bool:
    """Whether the standard ``OTEL_*`` variables ask for OTLP export of ``signal``."""
    exporters = environ.get(f"OTEL_{signal.upper()}_EXPORTER")
    if exporters is not None:
        return "otlp" in {name.strip() for name in exporters.split(",")}
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    )


def add_instrumentation(install: Callable[[TracerProvider], None]) -> None:
    """Run ``install`` with the process's tracer provider, now or once it is configured.

    The module that owns a traced library registers it when imported (the database helpers
    instrument asyncpg), so this module imports none of them and a service without that library
    never ships it."""
    _instrumentations.append(install)
    if _provider is not None:
        install(_provider)


def configure_telemetry(service_name: str) -> TracerProvider:
    """Install the process's tracer and meter providers and the registered instrumentations;
    later calls reuse them.

    ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` override ``service_name`` as usual.
    """
    global _provider, _meter_provider
    if _provider is not None:
        return _provider
    resource = Resource.create({SERVICE_NAME: service_name})
    provider = TracerProvider(resource=resource)
    if otlp_export_requested(os.environ):
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    readers: list[MetricReader] = []
    if otlp_export_requested(os.environ, "metrics"):
        # The reader reads OTEL_METRIC_EXPORT_INTERVAL itself.
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    metrics.set_meter_provider(meter_provider)
    _meter_provider = meter_provider
    for install in _instrumentations:
        install(provider)
    _provider = provider
    return provider


class WithoutErrorMessages(trace.TracerProvider):
    """Tracers whose current-span helper records neither an exception event nor an error
    description: the span still ends in ERROR (the instrumentation sets it, with the error's
    type), but no message text reaches the trace."""

    def __init__(self, provider: trace.TracerProvider) -> None:
        self._provider = provider

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes | None = None,
    ) -> trace.Tracer:
        return _TracerWithoutErrorMessages(
            self._provider.get_tracer(
                instrumenting_module_name, instrumenting_library_version, schema_url, attributes
            )
        )


class _TracerWithoutErrorMessages(trace.Tracer):
    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return self._tracer.start_span(*args, **kwargs)

    def start_as_current_span(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> AbstractContextManager[trace.Span]:
        kwargs.update(record_exception=False, set_status_on_exception=False)
        return self._tracer.start_as_current_span(*args, **kwargs)


def attach_span_exporter(exporter: SpanExporter) -> None:
    """Also send every finished span to ``exporter``, synchronously (tests use an in-memory one)."""
    if _provider is None:
        raise RuntimeError("configure_telemetry() must run first")
    _provider.add_span_processor(SimpleSpanProcessor(exporter))


def attach_metric_reader(reader: MetricReader) -> None:
    """Also let ``reader`` collect every instrument (tests use an ``InMemoryMetricReader``)."""
    if _meter_provider is None:
        raise RuntimeError("configure_telemetry() must run first")
    _meter_provider.add_metric_reader(reader)
