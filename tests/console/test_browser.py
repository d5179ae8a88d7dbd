"""The console's acceptance in a real browser (issue 26): an operator approves what an agent
asked for and the agent's repeat runs; a request nobody decides in time is denied; a guardian
sees their child's reads and what the AI saw, and is refused another family's child; a revoke
stops the agent's next call; a form without its CSRF token is refused. Every page is
screenshotted and checked with axe-core (``conftest.Visitor.check``)."""

from __future__ import annotations

from typing import Any

import asyncpg
import grpc.aio
import httpx
import pytest

from nemo_core.db import connect
from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_protos.context.v1 import context_service_pb2_grpc as context_grpc
from nemo_protos.context.v1 import learner_context_pb2
from services.toolplane.tests.mcp_http import error_envelope
from tests.journeys.support import mcp_client
from tests.stack import Stack

from .conftest import CONSOLE_PATH, OPERATOR, Visitor

APP = "nemo12-foundry"


async def _set_status(stack: Stack, reason: str) -> Any:
    async with mcp_client(stack, stack.agent_tokens["engineering-agent"]) as client:
        return await client.call_tool(
            "application.set_status",
            {"application_id": APP, "status": "maintenance", "reason": reason},
        )


def _approval_id(result: Any) -> str:
    error = error_envelope(result)["error"]
    assert error["code"] == "APPROVAL_REQUIRED", error
    return str(error["details"]["approval_id"])


@pytest.fixture
async def owner(console_stack: Stack) -> Any:
    conn = await connect(console_stack.owner_dsn)
    yield conn
    await conn.execute("UPDATE toolplane.applications SET status = 'active' WHERE id = $1", APP)
    await conn.close()


async def _ref(
    stack: Stack, learner_id: str, *, persist: bool = False
) -> learner_context_pb2.ContextBundle:
    """A learner's bundle as an agent view names it (its pseudonym, and a snapshot when
    persisted), asked as the tool plane with a scope that reaches every learner."""
    async with grpc.aio.insecure_channel(stack.context.address) as channel:
        built = await context_grpc.ContextServiceStub(channel).BuildContext(
            context_pb.BuildContextRequest(
                learner_id=learner_id,
                purpose="profile",
                persist=persist,
                agent_access=context_pb.AgentAccess(resource_scopes=["*"]),
            ),
            metadata=stack.metadata("toolplane"),
            timeout=10,
        )
    return built.bundle


async def test_an_operator_approves_the_call_an_agent_filed_and_its_repeat_runs(
    visitor: Visitor, console_stack: Stack, owner: asyncpg.Connection
) -> None:
    approval_id = _approval_id(await _set_status(console_stack, "browser: approve"))
    await visitor.sign_in(OPERATOR[1])
    assert visitor.page.url == f"{visitor.console}/approvals"
    row = visitor.page.locator(f"tr[data-approval='{approval_id}']")
    await row.wait_for()
    text = await row.inner_text()
    assert "application.set_status:v1" in text
    assert "engineering-agent" in text
    assert "status = maintenance" in text
    assert await row.locator("time[data-countdown]").count() == 1
    await visitor.check("approvals")
    await row.get_by_role("link").click()
    await visitor.page.wait_for_url(f"{visitor.console}/approvals/{approval_id}")
    await visitor.check("approval")
    await visitor.page.fill("input[name=note]", "maintenance window, browser test")
    await visitor.page.get_by_role("button", name="Approve").click()
    await visitor.page.wait_for_url(f"{visitor.console}/approvals/{approval_id}")
    assert "approved" in await visitor.page.locator(".status").first.inner_text()
    decided = await owner.fetchrow(
        "SELECT status, decided_by, decision_note FROM toolplane.approvals WHERE id = $1",
        approval_id,
    )
    assert decided is not None
    assert tuple(decided) == ("approved", OPERATOR[0], "maintenance window, browser test")
    ran = await _set_status(console_stack, "browser: approve")
    assert not ran.is_error, ran.structured_content
    assert (
        await owner.fetchval("SELECT status FROM toolplane.applications WHERE id = $1", APP)
        == "maintenance"
    )


async def test_a_request_nobody_decides_in_time_is_denied(
    visitor: Visitor, console_stack: Stack, owner: asyncpg.Connection
) -> None:
    approval_id = _approval_id(await _set_status(console_stack, "browser: too late"))
    await visitor.sign_in(OPERATOR[1])
    row = visitor.page.locator(f"tr[data-approval='{approval_id}']")
    assert await row.locator("time[data-countdown]").count() == 1
    # The time to decide runs out.
    await owner.execute(
        "UPDATE toolplane.approvals SET decide_by = now() WHERE id = $1", approval_id
    )
    assert await visitor.visit("/approvals") == 200
    assert "denied" in await row.locator(".status").inner_text()
    await visitor.check("approvals-denied")
    assert await visitor.visit(f"/approvals/{approval_id}") == 200
    assert await visitor.page.get_by_role("button", name="Approve").count() == 0
    token = await visitor.page.locator("input[name=csrf_token]").first.get_attribute("value")
    late = await visitor.page.request.post(
        f"{visitor.console}/approvals/{approval_id}/decide",
        form={"csrf_token": token or "", "decision": "approve"},
        max_redirects=0,
    )
    assert late.status == 409
    assert (
        await owner.fetchval("SELECT status FROM toolplane.approvals WHERE id = $1", approval_id)
        == "denied"
    )
    # The call did not run; repeating it files a new request.
    assert _approval_id(await _set_status(console_stack, "browser: too late")) != approval_id
    assert (
        await owner.fetchval("SELECT status FROM toolplane.applications WHERE id = $1", APP)
        == "active"
    )


async def test_a_post_without_its_csrf_token_is_refused(
    visitor: Visitor, console_stack: Stack, owner: asyncpg.Connection
) -> None:
    approval_id = _approval_id(await _set_status(console_stack, "browser: forged"))
    await visitor.sign_in(OPERATOR[1])
    token = await visitor.page.locator("input[name=csrf_token]").first.get_attribute("value")
    forms: list[tuple[dict[str, str | float | bool], dict[str, str]]] = [
        ({"decision": "approve"}, {}),
        ({"decision": "approve", "csrf_token": "not-the-token"}, {}),
        # The right token from another site's page.
        ({"decision": "approve", "csrf_token": token or ""}, {"Origin": "http://evil.example"}),
    ]
    for form, headers in forms:
        refused = await visitor.page.request.post(
            f"{visitor.console}/approvals/{approval_id}/decide",
            form=form,
            headers=headers,
            max_redirects=0,
        )
        assert refused.status == 403, form
        assert 'role="alert"' in await refused.text()
    assert (
        await owner.fetchval("SELECT status FROM toolplane.approvals WHERE id = $1", approval_id)
        == "pending"
    )
    await owner.execute("DELETE FROM toolplane.approvals WHERE id = $1", approval_id)


async def test_a_guardian_sees_their_childs_reads_and_what_the_ai_saw_and_no_other_family(
    visitor: Visitor, console_stack: Stack
) -> None:
    async with mcp_client(console_stack, console_stack.agent_tokens["learning-agent"]) as client:
        read = await client.call_tool("learner.get_profile", {"learner_id": "L-2041-1"})
    assert not read.is_error, read.structured_content
    own = await _ref(console_stack, "L-2041-1")
    other = await _ref(console_stack, "L-2041-2", persist=True)
    await visitor.sign_in("U-2041-P1")
    assert visitor.page.url == f"{visitor.console}/family"
    assert own.learner_ref in await visitor.page.locator("main").inner_text()
    assert other.learner_ref not in await visitor.page.locator("main").inner_text()
    await visitor.check("family")
    await visitor.page.get_by_role("link", name=f"Open {own.learner_ref}").click()
    await visitor.page.wait_for_url(f"{visitor.console}/family/{own.learner_ref}")
    reads = visitor.page.locator("tr[data-activity]", has_text="learner.get_profile")
    assert await reads.count() >= 1
    assert "learning-agent" in await reads.first.inner_text()
    assert "U-2041-P1" in await reads.first.inner_text()
    await visitor.check("child")
    await reads.first.get_by_role("link").click()
    await visitor.page.wait_for_url(f"{visitor.console}/snapshot?**")
    digest = await visitor.page.locator("[data-digest]").inner_text()
    assert len(digest) == 64
    assert own.learner_ref in await visitor.page.locator("main").inner_text()
    await visitor.check("snapshot")
    # Another family's child: refused, with the reason, never an empty page.
    assert await visitor.visit(f"/family/{other.learner_ref}") == 403
    assert await visitor.page.get_by_role("alert").count() == 1
    await visitor.check("refused-child")
    assert await visitor.visit(f"/snapshot?ref={other.input_ref}") == 403
    assert await visitor.page.get_by_role("alert").count() == 1
    # In Vietnamese.
    await visitor.visit("/family")
    await visitor.page.get_by_role("link", name="VI", exact=True).click()
    await visitor.page.wait_for_url(f"{visitor.console}/family")
    assert await visitor.page.get_attribute("html", "lang") == "vi"
    assert "Con của tôi" in await visitor.page.locator("h1").inner_text()
    await visitor.check("family-vi")


async def test_a_revoke_takes_effect_on_the_agents_next_call(
    visitor: Visitor, console_stack: Stack
) -> None:
    token = await console_stack.issue_agent_token("learning-agent", "U-2041-P2")
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx.AsyncClient(timeout=10) as http:
        headers = {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"}
        assert (
            await http.post(console_stack.mcp_url, json=ping, headers=headers)
        ).status_code == 200
        await visitor.sign_in("U-2041-P2")
        row = visitor.page.locator("tr", has_text="learning-agent").filter(
            has=visitor.page.get_by_role("button", name="Revoke")
        )
        assert await row.count() >= 1
        await visitor.check("family-authorizations")
        before = await row.count()
        await row.last.get_by_role("button", name="Revoke").click()
        await visitor.page.wait_for_url(f"{visitor.console}/family")
        assert await row.count() == before - 1
        assert (
            await http.post(console_stack.mcp_url, json=ping, headers=headers)
        ).status_code == 401


async def test_an_operator_issues_revokes_and_investigates(
    visitor: Visitor, console_stack: Stack, owner: asyncpg.Connection
) -> None:
    await visitor.sign_in(OPERATOR[1])
    assert await visitor.visit("/agents") == 200
    await visitor.check("agents")
    await visitor.page.select_option("#issue-agent", "research-agent")
    await visitor.page.fill("#issue-label", "browser: issued")
    await visitor.page.get_by_role("button", name="Issue a token").click()
    issued = await visitor.page.locator("code.token").inner_text()
    assert issued.startswith("nemo_at_")
    await visitor.check("agents-issued")
    token_id = await owner.fetchval(
        "SELECT id FROM toolplane.agent_tokens WHERE label = 'browser: issued'"
    )
    assert (
        await owner.fetchval("SELECT issued_by FROM toolplane.agent_tokens WHERE id = $1", token_id)
        == OPERATOR[0]
    )
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Authorization": f"Bearer {issued}", "MCP-Protocol-Version": "2025-11-25"}
    async with httpx.AsyncClient(timeout=10) as http:
        assert (
            await http.post(console_stack.mcp_url, json=ping, headers=headers)
        ).status_code == 200
        await visitor.visit("/agents")
        await visitor.page.get_by_role("button", name=f"Revoke {token_id}").click()
        await visitor.page.wait_for_url(f"{visitor.console}/agents")
        assert (
            await http.post(console_stack.mcp_url, json=ping, headers=headers)
        ).status_code == 401
    assert (
        await owner.fetchval(
            "SELECT revoked_by FROM toolplane.agent_tokens WHERE id = $1", token_id
        )
        == OPERATOR[0]
    )
    # The audit log, searched and exported.
    assert await visitor.visit("/audit?agent=engineering-agent&decision=require_approval") == 200
    rows = await visitor.page.locator("tbody tr").all_inner_texts()
    assert rows
    assert all("engineering-agent" in row and "require_approval" in row for row in rows)
    await visitor.check("audit")
    exported = await visitor.page.request.get(
        f"{visitor.console}/audit.csv?agent=engineering-agent&decision=require_approval"
    )
    assert exported.headers["content-type"].startswith("text/csv")
    lines = (await exported.text()).splitlines()
    assert lines[0].startswith("time,request_id,agent_id")
    assert len(lines) - 1 >= len(rows)
    for name, path in (("policies", "/policies"), ("evaluation", "/evaluation")):
        assert await visitor.visit(path) == 200
        await visitor.check(name)
    assert await visitor.page.locator("h1").count() == 1


async def test_a_person_who_is_no_operator_is_refused_the_operators_pages(
    visitor: Visitor,
) -> None:
    await visitor.sign_in("U-2041-P4")
    for path in ("/approvals", "/audit", "/agents"):
        assert await visitor.visit(path) == 403
        assert await visitor.page.get_by_role("alert").count() == 1
    await visitor.check("refused-operator-page")


async def test_cookies_and_headers_are_what_a_browser_expects(visitor: Visitor) -> None:
    await visitor.sign_in("U-2041-P1")
    [session] = [c for c in await visitor.context.cookies() if c["name"] == "nemo_console_session"]
    assert session["httpOnly"] is True
    assert session["sameSite"] == "Lax"
    assert session["path"] == CONSOLE_PATH
    assert session["expires"] > 0  # it expires
    response = await visitor.page.goto(f"{visitor.console}/family")
    assert response is not None
    policy = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"
    assert await visitor.page.locator("script:not([src])").count() == 0
    assert await visitor.page.locator("[style]").count() == 0
