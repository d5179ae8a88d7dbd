"""The router with tools made for the purpose: a result naming the learner's raw id is blocked, an
executor's unexpected failure reaches the agent only as INTERNAL_ERROR, listings show exactly the
versions an agent may call, and an approval request shows what the call is about."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest
from mcp.shared.tool_name_validation import validate_tool_name
from pydantic import BaseModel, ConfigDict, SecretStr

from nemo_core.client import create_channel
from nemo_core.db import Pool, create_pool
from nemo_toolplane.approvals import CallApprovals
from nemo_toolplane.audit.log import AuditLog
from nemo_toolplane.context_client import ContextClient
from nemo_toolplane.docs.library import DocsLibrary
from nemo_toolplane.limits.calls import CallLimiter
from nemo_toolplane.limits.shared import SharedBuckets
from nemo_toolplane.policy import Effect, Grant, Policy
from nemo_toolplane.principal import Principal, UserSource
from nemo_toolplane.registry import Registry, ToolDefinition
from nemo_toolplane.router import ToolRouter, _mentions, audit_name
from nemo_toolplane.rules.store import AgentRules
from nemo_toolplane.settings import ToolPlaneSettings
from nemo_toolplane.tool_call import Services, ToolCall
from nemo_toolplane.tool_kinds import Mode, Risk, Scope

from .conftest import CONTEXT_CALLER_TOKEN


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")

    learner_id: str


class Echo(BaseModel):
    note: str


async def leaky(call: ToolCall, args: Args) -> Echo:
    return Echo(note=f"about {args.learner_id}")


async def broken(call: ToolCall, args: Args) -> Echo:
    raise RuntimeError("secret internal detail")


async def stuck(call: ToolCall, args: Args) -> Echo:
    await asyncio.Event().wait()
    raise AssertionError("never reached")


def _tool(
    name: str, run: object, *, version: int = 1, mode: Mode = Mode.READ
) -> ToolDefinition[Args, Echo]:
    return ToolDefinition(
        name=name,
        version=version,
        description="test",
        risk=Risk.HIGH if mode is Mode.WRITE else Risk.LOW,
        mode=mode,
        input_model=Args,
        output_model=Echo,
        execute=run,  # type: ignore[arg-type]
        scope=Scope.LEARNER_WRITE if mode is Mode.WRITE else Scope.LEARNER_READ,
        learner_id_field="learner_id",
    )


MakeRouter = Callable[[Registry], ToolRouter]


@pytest.fixture
async def router_services(
    toolplane_dsn: str, context_address: str, tmp_path: Path
) -> AsyncIterator[tuple[Services, AuditLog]]:
    pool: Pool = await create_pool(toolplane_dsn, max_size=2)
    settings = ToolPlaneSettings(
        database_url=SecretStr(toolplane_dsn),
        context_address=context_address,
        client_token=SecretStr(CONTEXT_CALLER_TOKEN),
    )
    channel = create_channel(settings.context_address, settings)
    context = ContextClient(channel, settings.context_timeout_seconds)
    audit = AuditLog(pool, flush_seconds=0.05, batch_size=10)
    yield (
        Services(context_service=context, pool=pool, docs=DocsLibrary(tmp_path, "https://x")),
        audit,
    )
    await audit.close()
    await channel.close()
    await pool.close()


@pytest.fixture
def make_router(router_services: tuple[Services, AuditLog]) -> MakeRouter:
    """A router over the given tools and real services (database, context service, audit)."""
    services, audit = router_services

    def make(registry: Registry) -> ToolRouter:
        return ToolRouter(
            registry=registry,
            approvals=CallApprovals(services.pool, ttl_seconds=60),
            audit=audit,
            services=services,
            environment="development",
            limiter=CallLimiter([], SharedBuckets(services.pool, timeout=1)),
        )

    return make


@pytest.fixture
def router_parts(
    make_router: MakeRouter, router_services: tuple[Services, AuditLog]
) -> tuple[ToolRouter, AuditLog]:
    registry = Registry(
        [_tool("test.leaky", leaky), _tool("test.broken", broken), _tool("test.stuck", stuck)]
    )
    return make_router(registry), router_services[1]


RULES = AgentRules(grants=(Grant("test.*", "user", "*", Mode.READ),), policies=())


def principal(request_id: str) -> Principal:
    return Principal(
        "learning-agent", "S-router", "U-2041-P1", request_id, user_source=UserSource.TOKEN
    )


async def test_a_result_naming_the_learner_is_blocked(
    router_parts: tuple[ToolRouter, AuditLog],
    owner: asyncpg.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    router, audit = router_parts
    outcome = await router.call(
        principal("REQ-router-leak"),
        RULES,
        "test.leaky",
        {"learner_id": "L-2041-1"},
        transport="mcp",
    )
    assert outcome.output is None
    assert outcome.error is not None
    assert outcome.error.code == "INTERNAL_ERROR"
    assert "L-2041-1" not in str(outcome.error.envelope())
    assert any("naming the learner" in r.getMessage() for r in caplog.records)
    await audit.flush()
    row = await owner.fetchrow(
        "SELECT * FROM toolplane.audit_logs WHERE request_id = 'REQ-router-leak'"
    )
    assert row is not None
    assert (row["status"], row["error_code"]) == ("error", "INTERNAL_ERROR")


async def test_an_unexpected_failure_keeps_its_detail_in_the_log(
    router_parts: tuple[ToolRouter, AuditLog], caplog: pytest.LogCaptureFixture
) -> None:
    router, _ = router_parts
    outcome = await router.call(
        principal("REQ-router-broken"),
        RULES,
        "test.broken",
        {"learner_id": "L-2041-1"},
        transport="grpc",
    )
    assert outcome.error is not None
    assert outcome.error.envelope()["error"] == {
        "code": "INTERNAL_ERROR",
        "message": "the tool failed unexpectedly",
        "retryable": False,
        "details": {},
    }
    [logged] = [r for r in caplog.records if r.getMessage() == "tool executor failed"]
    assert logged.exc_info is not None
    assert str(logged.exc_info[1]) == "secret internal detail"


def test_the_learner_id_is_matched_as_a_whole_token() -> None:
    assert _mentions('{"note": "about L-2041-1"}', "L-2041-1")
    assert not _mentions('{"note": "about L-2041-10"}', "L-2041-1")
    assert not _mentions('{"ref": "XL-1"}', "L-2041-1")
    assert _mentions("(L-2041-1)", "L-2041-1")
    # The gate's answer: ``_`` and ``-`` are boundaries and case does not matter.
    assert _mentions('{"ref": "X_l-2041-1"}', "L-2041-1")
    assert _mentions('{"ref": "L-2041-1-b"}', "L-2041-1")


async def test_a_cancelled_call_still_leaves_its_audit_row(
    router_parts: tuple[ToolRouter, AuditLog], owner: asyncpg.Connection
) -> None:
    router, audit = router_parts
    call = asyncio.create_task(
        router.call(
            principal("REQ-router-cancelled"),
            RULES,
            "test.stuck",
            {"learner_id": "L-2041-1"},
            transport="grpc",
        )
    )
    await asyncio.sleep(0.5)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await audit.flush()
    row = await owner.fetchrow(
        "SELECT decision, status, tool_id FROM toolplane.audit_logs "
        "WHERE request_id = 'REQ-router-cancelled'"
    )
    assert row is not None
    assert dict(row) == {"decision": "allow", "status": "error", "tool_id": "test.stuck:v1"}


def test_unknown_tool_names_are_audited_only_when_they_look_like_names() -> None:
    assert audit_name("learner.get_profil") == "learner.get_profil"
    assert audit_name("learner.get_profile:v9") == "learner.get_profile:v9"
    for odd in ("x" * 129, "le\u0430rner.get_profile", "L-2041-1 is Nguyễn", "a b"):
        audited = audit_name(odd)
        assert audited is not None
        assert audited.startswith("invalid:")
        assert len(audited) == len("invalid:") + 16
    # No name at all is recorded as none, never as a made-up one.
    for missing in ("", None, 7, ["learner.get_profile"]):
        assert audit_name(missing) is None


async def echo(call: ToolCall, args: Args) -> Echo:
    return Echo(note="fine")


VERSIONS = Registry([_tool("test.tool", echo), _tool("test.tool", echo, version=2)])


@pytest.mark.parametrize(
    ("pattern", "listed"),
    [
        ("test.tool:v1", ["test.tool.v1"]),  # pinned to the old version: listed as name.vN
        ("test.tool:v2", ["test.tool"]),  # pinned to the latest: the bare name reaches it
        ("test.tool", ["test.tool", "test.tool.v1"]),  # every version may be called
        ("test.*", ["test.tool", "test.tool.v1"]),
        ("other.*", []),
    ],
)
async def test_listings_show_exactly_the_versions_the_grants_reach(
    pattern: str, listed: list[str], make_router: MakeRouter
) -> None:
    router = make_router(VERSIONS)
    rules = AgentRules(grants=(Grant(pattern, "*", "*", Mode.READ),), policies=())
    shown = router.list_tools(principal("REQ-router-list"), rules)
    assert [tool.name for tool in shown] == listed
    # Whatever is listed is a valid MCP tool name, and can be called by it.
    for tool in shown:
        assert validate_tool_name(tool.name).is_valid, tool.name
        outcome = await router.call(
            principal(f"REQ-router-list-{tool.name}"),
            rules,
            tool.name,
            {"learner_id": "L-2041-1"},
            transport="grpc",
        )
        assert outcome.tool is tool.tool
        assert outcome.error is None or outcome.error.code != "AUTHORIZATION_ERROR"


async def test_an_approval_request_shows_the_learner_the_call_is_about(
    make_router: MakeRouter, owner: asyncpg.Connection
) -> None:
    router = make_router(Registry([_tool("test.write", echo, mode=Mode.WRITE)]))
    rules = AgentRules(
        grants=(Grant("test.*", "user", "*", Mode.WRITE),),
        policies=(Policy("approve-test-writes", Effect.REQUIRE_APPROVAL, tool_scope="test.*"),),
    )
    outcome = await router.call(
        principal("REQ-router-approval"),
        rules,
        "test.write",
        {"learner_id": "L-2041-1"},
        transport="mcp",
    )
    assert outcome.error is not None
    assert outcome.error.code == "APPROVAL_REQUIRED"
    approval_id = outcome.error.details["approval_id"]
    try:
        row = await owner.fetchrow(
            "SELECT resource, arguments_json FROM toolplane.approvals WHERE id = $1", approval_id
        )
        assert row is not None
        assert dict(row) == {
            "resource": "learner:L-2041-1",
            "arguments_json": '{"learner_id":"L-2041-1"}',
        }
    finally:
        await owner.execute("DELETE FROM toolplane.approvals WHERE id = $1", approval_id)
