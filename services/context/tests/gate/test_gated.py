"""The gated result: what the gate hands out, and what a blocked bundle becomes (an INTERNAL
error, logged and counted without the data)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Mapping

import grpc
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from nemo_context.gate import Gated, find_leak, gate
from nemo_core.errors import ServiceError
from nemo_core.telemetry import attach_metric_reader
from nemo_protos.context.v1 import learner_context_pb2 as pb

from .spellings import LINKED

CounterTotal = Callable[[str, Mapping[str, str]], int]


def test_gate_returns_the_message_it_checked() -> None:
    bundle = pb.ContextBundle(learner_ref="nemo_0123456789ab", rendered_text="lớp 8")
    gated = gate(bundle, forbidden_values=LINKED)
    assert gated.message == bundle


def test_changing_the_original_or_a_read_copy_after_gating_changes_nothing_returned() -> None:
    bundle = pb.ContextBundle(learner_ref="nemo_0123456789ab", rendered_text="lớp 8")
    gated = gate(bundle, forbidden_values=LINKED)
    bundle.rendered_text = "Học sinh L-2041-1"
    read = gated.message
    read.rendered_text = "email: x@example.com"
    assert gated.message.rendered_text == "lớp 8"
    assert gated.with_text(input_ref="ai-context/x").message.rendered_text == "lớp 8"


def test_a_blocked_bundle_raises_internal_leak_blocked_and_is_logged_and_counted_without_data(
    caplog: pytest.LogCaptureFixture, counter_total: CounterTotal
) -> None:
    before = counter_total("nemo.context.gate.blocked", {"rule": "encoded_value"})
    hidden = base64.b64encode(b"L-2041-1").decode()
    bundle = pb.ContextBundle(rendered_text=f"Học sinh {hidden} (Nguyễn Minh An)")
    with (
        caplog.at_level(logging.ERROR, logger="nemo_context.gate"),
        pytest.raises(ServiceError) as raised,
    ):
        gate(bundle, forbidden_values=LINKED)
    assert raised.value.code is grpc.StatusCode.INTERNAL
    assert raised.value.reason == "CONTEXT_LEAK_BLOCKED"
    assert raised.value.message == "the context could not be returned safely"
    assert counter_total("nemo.context.gate.blocked", {"rule": "encoded_value"}) == before + 1
    [record] = [r for r in caplog.records if r.name == "nemo_context.gate"]
    logged = json.dumps({**vars(record), "args": None, "msg": record.getMessage()}, default=str)
    for secret in ("L-2041-1", hidden, "Nguyễn"):
        assert secret not in logged
    assert record.getMessage() == "identifier gate blocked a bundle"
    assert record.__dict__["gate_rule"] == "encoded_value"
    assert record.__dict__["gate_location"] == "ContextBundle"


def test_the_blocked_counter_is_exported_with_its_meter_unit_and_description(
    counter_total: CounterTotal,
) -> None:
    reader = InMemoryMetricReader()
    attach_metric_reader(reader)  # counter_total has configured the process's meter provider
    with pytest.raises(ServiceError):
        gate(pb.ContextBundle(rendered_text="Học sinh L-2041-1"), forbidden_values=LINKED)
    data = reader.get_metrics_data()
    assert data is not None
    [metric] = [
        metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        if scope.scope.name == "nemo_context.gate"
        for metric in scope.metrics
        if metric.name == "nemo.context.gate.blocked"
    ]
    assert metric.unit == "{bundle}"
    assert "identifier gate" in (metric.description or "")


def test_gated_values_come_only_from_the_gate() -> None:
    with pytest.raises(TypeError, match="only gate"):
        Gated(pb.ContextBundle(), frozenset(), key=object())


def test_text_added_after_gating_is_checked_too(counter_total: CounterTotal) -> None:
    gated = gate(pb.ContextBundle(rendered_text="lớp 8"), forbidden_values=LINKED)
    ref = "ai-context/2026-11-29/nemo_0123456789ab0123456789ab/x.json"
    referenced = gated.with_text(input_ref=ref)
    assert referenced.message.input_ref == ref
    assert referenced.message.rendered_text == "lớp 8"
    assert gated.message.input_ref == ""  # the gated original is left as it was
    for fields, rule in (
        ({"input_ref": "ai-context/L-2041-1/x.json"}, "value"),
        ({"email": "x"}, "field_name"),
    ):
        before = counter_total("nemo.context.gate.blocked", {"rule": rule})
        with pytest.raises(ServiceError) as raised:
            gated.with_text(**fields)
        assert raised.value.reason == "CONTEXT_LEAK_BLOCKED"
        assert counter_total("nemo.context.gate.blocked", {"rule": rule}) == before + 1


def test_a_single_string_of_forbidden_values_is_refused() -> None:
    with pytest.raises(TypeError, match="collection of strings"):
        gate(pb.ContextBundle(), forbidden_values="L-2041-1")
    with pytest.raises(TypeError, match="collection of strings"):
        find_leak("lớp 8", forbidden_values="L-2041-1")
