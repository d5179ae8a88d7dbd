"""Browsers at the MCP edge: the Origin and Host allow-lists as properties over generated names,
the local stack's lists, and the edge's answers (403, 421, CORS) over HTTP, each refusal with
its one audit row."""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from nemo_toolplane.mcp.origins import (
    LOOPBACK_HOSTS,
    LOOPBACK_ORIGINS,
    OriginPolicy,
    check_host_pattern,
    check_origin_pattern,
)
from nemo_toolplane.settings import ToolPlaneSettings
from services.toolplane.tests.conftest import AgentTokens, RunningToolPlane, StartToolPlane
from services.toolplane.tests.mcp_http import modern_call, post

_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_names = st.lists(_label, min_size=1, max_size=3).map(".".join)
_ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda parts: ".".join(map(str, parts)))
_hosts = st.one_of(_names, _ipv4, st.just("[::1]"))
_ports = st.integers(1, 65535)
_schemes = st.sampled_from(["http", "https"])


@settings(max_examples=300, deadline=None)
@given(scheme=_schemes, host=_hosts, port=_ports)
def test_a_port_wildcard_admits_the_host_on_any_port_or_none(
    scheme: str, host: str, port: int
) -> None:
    policy = OriginPolicy([f"{scheme}://{host}:*"], [f"{host}:*"])
    assert policy.origin_allowed(f"{scheme}://{host}:{port}")
    assert policy.origin_allowed(f"{scheme}://{host}")
    assert policy.host_allowed(f"{host}:{port}")
    assert policy.host_allowed(host.upper())


@settings(max_examples=300, deadline=None)
@given(scheme=_schemes, host=_hosts, other=_hosts, port=_ports, data=st.data())
def test_anything_but_the_allowed_scheme_and_host_is_refused(
    scheme: str, host: str, other: str, port: int, data: st.DataObject
) -> None:
    assume(other != host)
    policy = OriginPolicy([f"{scheme}://{host}:*"], [f"{host}:*"])
    other_scheme = "https" if scheme == "http" else "http"
    near_misses = [
        f"{scheme}://{other}:{port}",
        f"{other_scheme}://{host}:{port}",
        f"{scheme}://{host}.{other}:{port}",
        f"{scheme}://{other}.{host}:{port}",
        f"{scheme}://{host}:{port}@{other}",
        f"{scheme}://{host}:{port}.{other}",
        f"{scheme}://{host}:{port}/",
        "null",
    ]
    origin = data.draw(st.sampled_from(near_misses))
    assert not policy.origin_allowed(origin)
    host_misses = [f"{other}:{port}", f"{host}.{other}", f"{host}:{port}.{other}", f"{host}:x"]
    assert not policy.host_allowed(data.draw(st.sampled_from(host_misses)))
    assert not policy.host_allowed(None)


@settings(max_examples=200, deadline=None)
@given(scheme=_schemes, host=_hosts, port=_ports, other=_ports)
def test_an_exact_pattern_admits_that_port_only(
    scheme: str, host: str, port: int, other: int
) -> None:
    assume(other != port)
    policy = OriginPolicy([f"{scheme}://{host}:{port}"], [f"{host}:{port}"])
    assert policy.origin_allowed(f"{scheme}://{host}:{port}")
    assert not policy.origin_allowed(f"{scheme}://{host}:{other}")
    assert not policy.origin_allowed(f"{scheme}://{host}")
    assert policy.host_allowed(f"{host}:{port}")
    assert not policy.host_allowed(f"{host}:{other}")


def test_without_host_patterns_any_host_is_answered_and_no_origin_is() -> None:
    policy = OriginPolicy()
    assert policy.host_allowed("mcp.nemo12.com")
    assert policy.host_allowed(None)
    assert not policy.origin_allowed("http://localhost:6274")


def test_the_local_stack_admits_browsers_on_this_machine_only() -> None:
    local = OriginPolicy(LOOPBACK_ORIGINS, LOOPBACK_HOSTS)
    # The inspector's own page, on each loopback name.
    for origin in ("http://localhost:6274", "http://127.0.0.1:6274", "http://[::1]:6274"):
        assert local.origin_allowed(origin)
    for origin in (
        "https://evil.example",
        "http://localhost.evil.example:6274",
        "http://127.0.0.1.nip.io:6274",
        "http://192.168.1.20:6274",
        "null",
    ):
        assert not local.origin_allowed(origin)
    assert local.host_allowed("127.0.0.1:8080")
    assert local.host_allowed("localhost")
    assert not local.host_allowed("evil.example:8080")
    assert not local.host_allowed("0.0.0.0:8080")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("allowed_origins", "localhost:3000"),
        ("allowed_origins", "http://console.example/path"),
        ("allowed_origins", "ftp://console.example"),
        ("allowed_origins", "http://console.example:70000"),
        ("allowed_origins", "*"),
        ("allowed_hosts", "http://console.example"),
        ("allowed_hosts", "console.example:*:*"),
        ("allowed_hosts", "bad_host.example"),
    ],
)
def test_a_malformed_pattern_is_refused_at_start(field: str, value: str) -> None:
    values: dict[str, Any] = {"database_url": "postgresql://x", field: [value]}
    with pytest.raises(ValidationError, match=field):
        ToolPlaneSettings(**values)


LOCAL_ORIGIN = "http://localhost:6274"
LOCAL = OriginPolicy(LOOPBACK_ORIGINS, LOOPBACK_HOSTS)
CALL = modern_call("docs.search_docs", {"query": "audit"})
_HTTP_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
AuditRows = Callable[..., Awaitable[list[asyncpg.Record]]]


@pytest.fixture(scope="module")
async def browser_plane(start_toolplane: StartToolPlane) -> RunningToolPlane:
    """A tool plane answering browsers on this machine only, as the local stack does."""
    return await start_toolplane(
        allowed_origins=list(LOOPBACK_ORIGINS), allowed_hosts=list(LOOPBACK_HOSTS)
    )


def _port(plane: RunningToolPlane) -> str:
    return plane.mcp_url.split(":")[2].split("/")[0]


async def test_a_preflight_from_an_allowed_origin_needs_no_token(
    browser_plane: RunningToolPlane,
) -> None:
    asked = "authorization, content-type, mcp-protocol-version, mcp-method, mcp-name"
    async with httpx.AsyncClient() as http:
        allowed = await http.options(
            browser_plane.mcp_url,
            headers={
                "Origin": LOCAL_ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": asked,
            },
        )
        foreign = await http.options(
            browser_plane.mcp_url,
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == LOCAL_ORIGIN
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert allowed.headers["access-control-allow-headers"] == asked
    assert foreign.status_code == 403
    assert "access-control-allow-origin" not in foreign.headers


async def test_an_allowed_origin_reads_the_answer_and_its_request_id(
    browser_plane: RunningToolPlane, tokens: AgentTokens
) -> None:
    response = await post(
        browser_plane.mcp_url,
        CALL,
        token=tokens.research,
        headers={"Origin": LOCAL_ORIGIN, "X-Request-Id": "REQ-browser-1"},
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == LOCAL_ORIGIN
    exposed = {
        h.strip().lower() for h in response.headers["access-control-expose-headers"].split(",")
    }
    assert {"x-request-id", "www-authenticate"} <= exposed
    assert response.headers["x-request-id"] == "REQ-browser-1"


async def test_a_host_not_allowed_is_421_before_authentication(
    browser_plane: RunningToolPlane, tokens: AgentTokens
) -> None:
    rebound = {"Host": f"evil.example:{_port(browser_plane)}"}
    with_token = await post(browser_plane.mcp_url, CALL, token=tokens.research, headers=rebound)
    without = await post(browser_plane.mcp_url, CALL, headers=rebound)
    assert (with_token.status_code, without.status_code) == (421, 421)
    assert "www-authenticate" not in without.headers
    assert (await post(browser_plane.mcp_url, CALL, token=tokens.research)).status_code == 200
    local = {"Host": f"localhost:{_port(browser_plane)}"}
    assert (
        await post(browser_plane.mcp_url, CALL, token=tokens.research, headers=local)
    ).status_code == 200
    async with httpx.AsyncClient() as http:
        health = await http.get(
            browser_plane.mcp_url.removesuffix("/mcp") + "/health", headers=rebound
        )
    assert health.status_code == 200


# --- every refusal leaves one audit row -------------------------------------------------------

#: Origins a page elsewhere sends: well-formed ones of other sites, and any text at all.
_shaped_origins = st.builds(
    lambda scheme, host, port: f"{scheme}://{host}:{port}", _schemes, _hosts, _ports
) | st.builds(lambda scheme, host: f"{scheme}://{host}".upper(), _schemes, _names)
_text = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=400)
_DIGEST = re.compile(r"invalid:[0-9a-f]{16}")


async def _refused_row(
    plane: RunningToolPlane,
    audit_rows: AuditRows,
    headers: dict[str, str],
    *,
    status: int,
    token: str | None,
    method: str = "POST",
) -> dict[str, Any]:
    """Send one request the browser checks refuse; its one audit row."""
    request_id = f"REQ-browser-{uuid.uuid4()}"
    sent = {"X-Request-Id": request_id, **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.request(method, plane.mcp_url, json=CALL, headers=sent)
    assert response.status_code == status, response.text
    [row] = await audit_rows(request_id=request_id, plane=plane)
    assert (row["agent_id"], row["user_id"], row["tool_id"]) == (None, None, None)
    assert (row["decision"], row["status"], row["error_code"]) == (
        "deny",
        "denied",
        "AUTHORIZATION_ERROR",
    )
    # Refused before the credential was read: the row says nothing of one, sent or not.
    assert (row["credential_kind"], row["token_id"]) == (None, None)
    assert row["method"] == f"{method} /mcp"
    assert row["metadata"]["transport"] == "mcp"
    return dict(row)


def _kept_form(sent: str, kept: str, shape_check: Callable[[str], str]) -> None:
    """A refused value is kept lower-cased when it has its header's shape, else as a digest."""
    assert len(kept) <= 270
    if kept == sent.lower():
        assert kept == "null" or shape_check(kept) == kept
    else:
        assert _DIGEST.fullmatch(kept), kept


@_HTTP_SETTINGS
@given(
    sent=st.one_of(
        _shaped_origins.map(lambda origin: (origin, True)),
        st.one_of(_text, st.just("null")).map(lambda origin: (origin, False)),
    ),
    with_token=st.booleans(),
)
async def test_a_foreign_origin_leaves_one_row_with_the_origin_bounded(
    browser_plane: RunningToolPlane,
    tokens: AgentTokens,
    audit_rows: AuditRows,
    sent: tuple[str, bool],
    with_token: bool,
) -> None:
    origin, shaped = sent
    assume(not LOCAL.origin_allowed(origin))
    row = await _refused_row(
        browser_plane,
        audit_rows,
        {"Origin": origin},
        status=403,
        token=tokens.research if with_token else None,
    )
    assert row["metadata"]["refused"] == "origin not allowed"
    kept = row["metadata"]["origin"]
    _kept_form(origin, kept, check_origin_pattern)
    if shaped:
        assert kept == origin.lower()


@_HTTP_SETTINGS
@given(host=st.one_of(_hosts, _text), port=_ports)
async def test_a_foreign_host_leaves_one_row_with_the_host_bounded(
    browser_plane: RunningToolPlane,
    tokens: AgentTokens,
    audit_rows: AuditRows,
    host: str,
    port: int,
) -> None:
    sent = f"{host}:{port}"
    assume(not LOCAL.host_allowed(sent))
    row = await _refused_row(
        browser_plane, audit_rows, {"Host": sent}, status=421, token=tokens.research
    )
    assert row["metadata"]["refused"] == "host not allowed"
    _kept_form(sent, row["metadata"]["host"], check_host_pattern)


async def test_a_foreign_preflight_is_audited_under_its_own_method(
    browser_plane: RunningToolPlane, audit_rows: AuditRows
) -> None:
    row = await _refused_row(
        browser_plane,
        audit_rows,
        {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        status=403,
        token=None,
        method="OPTIONS",
    )
    assert row["metadata"]["origin"] == "https://evil.example"
