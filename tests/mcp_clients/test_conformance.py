"""The official MCP conformance suite against the local stack, each revision at its own wire: the
scenarios a revision requires of a server, judged where they apply to this one.

The edge is a tools-only, stateless server that answers JSON: it offers no prompts, resources,
completions, logging, sampling, elicitation or tasks, and none of the suite's fixture tools
(``test_simple_text`` and the like). Scenarios about those are run by the suite but not judged
here (:data:`NOT_APPLICABLE` says why for each); in the scenarios that apply, every check must
pass except the few listed in :data:`NOT_JUDGED`, which need a fixture tool. A scenario a future
pin adds fails the test until it is placed in one table or the other.

The suite connects as an anonymous client; a loopback proxy adds an agent's token and otherwise
forwards each request as sent (``Host`` and ``Origin`` included).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from nemo_devtools.node import NodeTools
from tests.stack import Stack

from .bearer_proxy import bearer_proxy
from .conftest import run_node

#: Per revision, the scenarios that test what this server must do.
APPLICABLE: Mapping[str, frozenset[str]] = {
    "2025-11-25": frozenset(
        {"server-initialize", "ping", "tools-list", "dns-rebinding-protection"}
    ),
    "2026-07-28": frozenset(
        {
            "server-stateless",
            "tools-list",
            "caching",
            "dns-rebinding-protection",
            "http-header-validation",
            "server-sse-multiple-streams",
            "input-required-result-unsupported-methods",
        }
    ),
}

_FIXTURE = "needs the suite's fixture tool"
_NO_PROMPTS_OR_RESOURCES = "the edge offers no prompts or resources"

#: Checks of applicable scenarios that cannot be exercised here, and why.
NOT_JUDGED: Mapping[tuple[str, str], str] = {
    ("server-stateless", "sep-2575-server-rejects-undeclared-capability"): (
        f"{_FIXTURE} test_missing_capability"
    ),
    ("server-stateless", "sep-2575-missing-capability-http-400"): (
        f"{_FIXTURE} test_missing_capability"
    ),
    ("server-stateless", "sep-2575-http-server-no-independent-requests-on-stream"): (
        f"{_FIXTURE} test_streaming_elicitation"
    ),
    ("server-stateless", "sep-2575-server-no-log-without-loglevel"): (
        f"{_FIXTURE} test_logging_tool"
    ),
    ("server-stateless", "sep-2575-server-sends-subscription-ack"): "no subscriptions/listen",
    ("server-stateless", "sep-2575-server-tags-subscription-id"): "no subscriptions/listen",
    ("server-stateless", "sep-2575-server-honors-notification-filter"): "no subscriptions/listen",
    ("server-stateless", "sep-2575-server-sends-prompts-list-changed-on-subscription"): (
        "no subscriptions/listen"
    ),
    ("server-stateless", "sep-2575-server-sends-tools-list-changed-on-subscription"): (
        "no subscriptions/listen"
    ),
    ("caching", "sep-2549-prompts-list-caching-hints"): _NO_PROMPTS_OR_RESOURCES,
    ("caching", "sep-2549-resources-list-caching-hints"): _NO_PROMPTS_OR_RESOURCES,
    ("caching", "sep-2549-resources-templates-list-caching-hints"): _NO_PROMPTS_OR_RESOURCES,
    ("caching", "sep-2549-resources-read-caching-hints"): _NO_PROMPTS_OR_RESOURCES,
}

#: Every other scenario a revision requires, and why it does not apply to this server.
NOT_APPLICABLE: Mapping[str, str] = {
    "logging-set-level": "no logging capability",
    "completion-complete": "no completions capability",
    **{
        f"tools-call-{name}": f"{_FIXTURE} for {name.replace('-', ' ')}"
        for name in (
            "simple-text",
            "image",
            "audio",
            "embedded-resource",
            "mixed-content",
            "with-logging",
            "error",
            "with-progress",
            "sampling",
            "elicitation",
        )
    },
    "elicitation-sep1034-defaults": "no elicitation (a fixture tool elicits)",
    "elicitation-sep1330-enums": "no elicitation (a fixture tool elicits)",
    "json-schema-2020-12": f"{_FIXTURE} json_schema_2020_12_tool",
    **dict.fromkeys(
        (
            "resources-list",
            "resources-read-text",
            "resources-read-binary",
            "resources-templates-read",
            "resources-subscribe",
            "resources-unsubscribe",
            "sep-2164-resource-not-found",
            "prompts-list",
            "prompts-get-simple",
            "prompts-get-with-args",
            "prompts-get-embedded-resource",
            "prompts-get-with-image",
        ),
        _NO_PROMPTS_OR_RESOURCES,
    ),
    "server-session-lifecycle": "stateless: the edge issues no session to end",
    "server-sse-polling": "JSON answers: the edge opens no event stream to poll",
    # Applicable at 2026-07-28; at 2025-11-25 the scenario needs a session.
    "server-sse-multiple-streams": "stateless: at 2025-11-25 it needs a session",
    **{
        f"input-required-result-{name}": f"{_FIXTURE} (no tool asks for input)"
        for name in (
            "basic-elicitation",
            "basic-sampling",
            "basic-list-roots",
            "request-state",
            "multiple-input-requests",
            "multi-round",
            "missing-input-response",
            "non-tool-request",
            "result-type",
            "tampered-state",
            "capability-check",
            "ignore-extra-params",
            "validate-input",
        )
    },
    "http-custom-header-server-validation": "no tool declares x-mcp-header parameters",
    **{
        f"tasks-{name}": "tasks extension: every call answers at once"
        for name in (
            "lifecycle",
            "capability-negotiation",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "request-headers",
            "dispatch-and-envelope",
            "status-notifications",
            "required-task-error",
            "mrtr-composition",
        )
    },
}

#: Statuses that pass a check (INFO reports, never fails).
PASSING = frozenset({"SUCCESS", "INFO"})
_RESULT_DIR = re.compile(r"server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z")


def _checks_by_scenario(output: Path) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for checks in output.glob("*/checks.json"):
        match = _RESULT_DIR.fullmatch(checks.parent.name)
        assert match is not None, checks
        found[match["scenario"]] = json.loads(checks.read_text(encoding="utf-8"))
    return found


@pytest.mark.parametrize("revision", sorted(APPLICABLE))
async def test_the_server_scenarios_that_apply_pass(
    node_tools: NodeTools, stack: Stack, tmp_path: Path, revision: str
) -> None:
    suite = node_tools.package("@modelcontextprotocol/conformance") / "dist" / "index.js"
    upstream = stack.mcp_url.removesuffix("/mcp")
    async with bearer_proxy(upstream, stack.agent_tokens["research-agent"]) as proxied:
        finished = await run_node(
            node_tools,
            [
                str(node_tools.node),
                str(suite),
                *("server", "--url", f"{proxied}/mcp", "--requirements", revision),
                *("--output-dir", str(tmp_path)),
            ],
        )
    ran = _checks_by_scenario(tmp_path)
    assert ran, finished.stdout[-4000:] + finished.stderr[-4000:]
    unplaced = set(ran) - APPLICABLE[revision] - set(NOT_APPLICABLE)
    assert not unplaced, f"scenarios neither applicable nor excused: {sorted(unplaced)}"
    assert APPLICABLE[revision] <= set(ran)

    failed = {
        (scenario, check["id"]): check.get("errorMessage") or check["status"]
        for scenario in APPLICABLE[revision]
        for check in ran[scenario]
        if check["status"] not in PASSING and (scenario, check["id"]) not in NOT_JUDGED
    }
    assert not failed, failed
    stale = {
        key
        for key in NOT_JUDGED
        if key[0] in APPLICABLE[revision] and key[1] not in {c["id"] for c in ran[key[0]]}
    }
    assert not stale, f"excused checks the suite no longer has: {sorted(stale)}"
    judged = [check for scenario in APPLICABLE[revision] for check in ran[scenario]]
    assert any(check["id"] == "wire-schema-valid" for check in judged)
