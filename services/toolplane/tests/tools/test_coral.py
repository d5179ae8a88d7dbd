"""Knowledge tools: arguments the context service would refuse are the agent's VALIDATION_ERROR,
caught by the tool's own schema where it can be, never an INTERNAL_ERROR."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from services.toolplane.tests.conftest import AgentTokens, RunningToolPlane, counter
from services.toolplane.tests.mcp_http import error_envelope

SEARCH = "coral.search_knowledge:v1"


@pytest.mark.parametrize("query", ["?", "a b c", "x", "đ . ạ"])
async def test_a_query_without_a_searchable_word_fails_the_schema(
    query: str,
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    audit_rows: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    executions = "nemo.toolplane.tool.executions"
    before = counter(metric_reader, executions, **{"nemo.tool.id": SEARCH})
    request_id = f"REQ-coral-query-{query.encode().hex()}"
    async with toolplane.mcp(tokens.research, {"X-Request-Id": request_id}) as client:
        result = await client.call_tool("coral.search_knowledge", {"query": query})
    error = error_envelope(result)["error"]
    assert (error["code"], error["retryable"]) == ("VALIDATION_ERROR", False)
    assert [e["field"] for e in error["details"]["errors"]] == ["query"]
    assert query not in json.dumps(error["details"])
    # Refused by the schema: the executor, and so the context service, never saw it.
    assert counter(metric_reader, executions, **{"nemo.tool.id": SEARCH}) == before
    [row] = await audit_rows(request_id=request_id)
    assert (row["decision"], row["status"], row["error_code"]) == (
        "deny",
        "invalid",
        "VALIDATION_ERROR",
    )


async def test_a_number_or_one_real_word_is_enough(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    async with toolplane.mcp(tokens.research) as client:
        for query in ("9", "x + phương trình", "Đạo hàm"):
            result = await client.call_tool("coral.search_knowledge", {"query": query})
            assert not result.is_error, (query, result.structured_content)


async def test_arguments_the_context_service_refuses_are_a_validation_error(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    audit_rows: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A control character in the subject passes the tool's schema; the context service refuses
    # it (INVALID_ARGUMENT), which is the agent's to fix, not an internal failure.
    arguments = {"query": "phân số", "subject": "ma\tth"}
    with caplog.at_level(logging.WARNING):
        async with toolplane.mcp(tokens.research, {"X-Request-Id": "REQ-coral-subject"}) as client:
            result = await client.call_tool("coral.search_knowledge", arguments)
    assert error_envelope(result)["error"] == {
        "code": "VALIDATION_ERROR",
        "message": "the context service refused the arguments",
        "retryable": False,
        "details": {"reason": "INVALID_SUBJECT"},
    }
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    [row] = await audit_rows(request_id="REQ-coral-subject")
    assert (row["tool_id"], row["status"], row["error_code"]) == (
        SEARCH,
        "error",
        "VALIDATION_ERROR",
    )
