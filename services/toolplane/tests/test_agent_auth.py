"""Agent authentication: one reading of the bearer token and one failure count for both edges."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_core.errors import error_details
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_toolplane.agent_auth import bearer_token

from .conftest import AgentTokens, StartToolPlane
from .mcp_http import modern_call, post

_token_chars = st.characters(min_codepoint=0x21, max_codepoint=0x7E)
token_texts = st.text(alphabet=_token_chars, min_size=1, max_size=40)
spaces = st.text(alphabet=" \t", max_size=3)


@given(st.sampled_from(["Bearer", "bearer", "BEARER", "bEaReR"]), spaces, token_texts, spaces)
def test_a_bearer_token_is_read_in_any_case_of_the_scheme(
    scheme: str, before: str, token: str, after: str
) -> None:
    assert bearer_token(f"{scheme} {before}{token}{after}") == token


@given(st.sampled_from(["Basic", "Token", "Bearer:", "Digest", ""]), token_texts)
def test_another_scheme_or_no_token_is_no_token(scheme: str, token: str) -> None:
    assert bearer_token(f"{scheme} {token}") is None
    assert bearer_token(token) is None  # a token without its scheme
    assert bearer_token("Bearer ") is None
    assert bearer_token(None) is None
    assert bearer_token("") is None


async def test_failures_over_grpc_count_for_the_mcp_edge(
    start_toolplane: StartToolPlane, tokens: AgentTokens
) -> None:
    plane = await start_toolplane(auth_failures_per_minute=2)
    stub = plane.tools_stub()
    for _ in range(2):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.ListTools(
                pb.ListToolsRequest(), metadata=(("authorization", "Bearer wrong"),), timeout=10
            )
        assert error_details(refused.value).reason == "AGENT_UNAUTHENTICATED"
    call = modern_call("docs.search_docs", {"query": "audit"})
    blocked = await post(plane.mcp_url, call, token="nemo_at_wrong")
    assert blocked.status_code == 429
    assert (await post(plane.mcp_url, call, token=tokens.research)).status_code == 200
