"""JSON log lines: one object per line, with trace ids inside a span and no secrets."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from nemo_core.logs import JsonFormatter, configure_logging


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("context"))
    logger = logging.getLogger("nemo.test.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_log_line_inside_a_span_carries_its_ids(
    captured: tuple[logging.Logger, io.StringIO], spans: InMemorySpanExporter
) -> None:
    logger, stream = captured
    with trace.get_tracer("test").start_as_current_span("work") as span:
        logger.info("built %s", "bundle", extra={"purpose": "tutor_hint", "items": 3})
    (entry,) = _lines(stream)
    context = span.get_span_context()
    assert entry["trace_id"] == f"{context.trace_id:032x}"
    assert entry["span_id"] == f"{context.span_id:016x}"
    assert entry["message"] == "built bundle"
    assert (entry["level"], entry["logger"], entry["service"]) == (
        "INFO",
        "nemo.test.logs",
        "context",
    )
    assert (entry["purpose"], entry["items"]) == ("tutor_hint", 3)
    assert datetime.fromisoformat(str(entry["timestamp"])).tzinfo is not None


def test_log_line_outside_a_span_has_no_trace_ids(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    logger.warning("idle")
    (entry,) = _lines(stream)
    assert "trace_id" not in entry
    assert "span_id" not in entry


def test_secrets_and_odd_values_stay_on_one_line(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    logger.info("configured\nwith two lines", extra={"token": SecretStr("s3cr3t-token-value")})
    text = stream.getvalue()
    assert "s3cr3t" not in text
    assert text.count("\n") == 1
    assert _lines(stream)[0]["message"] == "configured\nwith two lines"


def test_exceptions_are_logged_with_their_traceback(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    try:
        raise KeyError("missing")
    except KeyError:
        logger.exception("lookup failed")
    (entry,) = _lines(stream)
    assert "Traceback" in str(entry["exception"])
    assert "KeyError" in str(entry["exception"])


def test_configure_logging_installs_one_json_handler() -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    stream = io.StringIO()
    try:
        configure_logging("gateway", "WARNING", stream)
        configure_logging("gateway", "WARNING", stream)
        logging.getLogger("nemo.test.root").info("hidden")
        logging.getLogger("nemo.test.root").warning("shown")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)
    (entry,) = _lines(stream)
    assert (entry["message"], entry["service"]) == ("shown", "gateway")
