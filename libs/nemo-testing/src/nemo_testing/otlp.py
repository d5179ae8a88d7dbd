"""A real OTLP/gRPC receiver on loopback for traces and metrics that service processes export.

Tests start the services with ``OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint`` and read what
arrived: spans by trace id, and the latest value of each counter by name and attributes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType

import grpc
import grpc.aio
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def _value(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def attributes(pairs: Iterable[KeyValue]) -> dict[str, object]:
    """OTLP key-values as a plain dict."""
    return {pair.key: _value(pair.value) for pair in pairs}


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, flattened."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: Mapping[str, object]
    status_code: int


@dataclass(frozen=True)
class ReceivedPoint:
    """One data point of a sum or gauge, as last exported."""

    service: str
    metric: str
    attributes: Mapping[str, object]
    value: float


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    async def Export(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.aio.ServicerContext[object, object],
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            service = str(attributes(resource_spans.resource.attributes).get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self._receiver.spans.append(
                        ReceivedSpan(
                            service=service,
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes=attributes(span.attributes),
                            status_code=span.status.code,
                        )
                    )
        self._receiver.changed()
        return trace_service_pb2.ExportTraceServiceResponse()


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    async def Export(
        self,
        request: metrics_service_pb2.ExportMetricsServiceRequest,
        context: grpc.aio.ServicerContext[object, object],
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        for resource_metrics in request.resource_metrics:
            service = str(attributes(resource_metrics.resource.attributes).get("service.name", ""))
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    kind = metric.WhichOneof("data")
                    if kind not in ("sum", "gauge"):
                        continue
                    for point in getattr(metric, kind).data_points:
                        number = point.as_int if point.WhichOneof("value") == "as_int" else None
                        value = float(number if number is not None else point.as_double)
                        labels = attributes(point.attributes)
                        # Cumulative sums: the latest export of a series replaces the earlier one.
                        key = (service, metric.name, repr(sorted(labels.items())))
                        self._receiver.points[key] = ReceivedPoint(
                            service, metric.name, labels, value
                        )
        self._receiver.changed()
        return metrics_service_pb2.ExportMetricsServiceResponse()


@dataclass
class OtlpReceiver:
    """OTLP/gRPC traces and metrics receiver; use as an async context manager."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    points: dict[tuple[str, str, str], ReceivedPoint] = field(default_factory=dict)
    port: int = 0
    _server: grpc.aio.Server | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def changed(self) -> None:
        self._changed.set()

    async def start(self) -> None:
        server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(self), server)  # type: ignore[no-untyped-call]
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(self), server)  # type: ignore[no-untyped-call]
        self.port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._server = server

    async def close(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)

    async def __aenter__(self) -> OtlpReceiver:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        """Spans of one trace (hex id) received so far."""
        return [span for span in self.spans if span.trace_id == trace_id]

    def counter(self, service: str, metric: str, **where: object) -> float:
        """Sum over the points of ``metric`` from ``service`` whose attributes match ``where``."""
        return sum(
            point.value
            for point in self.points.values()
            if point.service == service
            and point.metric == metric
            and all(point.attributes.get(key) == value for key, value in where.items())
        )

    async def wait_until(self, condition: Callable[[], bool], seconds: float = 10.0) -> None:
        """Return once ``condition()`` holds after an export; TimeoutError otherwise."""
        deadline = time.monotonic() + seconds
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the exported telemetry never met the condition")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=min(remaining, 0.5))
            except TimeoutError:
                continue
