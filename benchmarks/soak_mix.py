"""The soak's request mix: what each worker calls, and on which service it counts.

Every operation is one realistic call a platform service or an agent makes, with the demo data's
learners (L-2041-1, L-2041-3), chat session and agents. A call that returns an error status, a
JSON-RPC error or a tool result with ``isError`` raises, so the driver counts it as an error.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc.aio
import httpx
from google.protobuf import struct_pb2

from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_protos.context.v1 import context_service_pb2_grpc as context_grpc
from nemo_protos.gateway.v1 import gateway_service_pb2 as gateway_pb
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc as gateway_grpc
from nemo_protos.type.v1 import user_source_pb2
from nemo_toolplane.mcp.endpoint import ERROR_META_KEY
from tests.stack import Stack

TIMEOUT_SECONDS = 30.0
PROMPT_PURPOSES = ("item_generation", "tutor_hint", "plan_explanation", "portrait_summary")
AGENT_VIEWS = ("profile", "learning_state", "learning_progress", "competency_profile")
LEARNER_PROMPTS = ("learner.tutor_hint", "learner.plan_explanation", "learner.portrait_summary")
CHAT_SESSION = "CS-L1-TUTOR"
#: Agent views are built for a parent of L-2041-1 whose agent token is bound to them.
PARENT_AGENT = context_pb.AgentAccess(
    user_id="U-2041-P1", user_source=user_source_pb2.USER_SOURCE_TOKEN, resource_scopes=["user"]
)


@dataclass(frozen=True)
class Operation:
    name: str
    service: str
    call: Callable[[], Awaitable[object]]


class SoakFailure(Exception):
    """A call that answered, but with an error."""


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


def _cycle(*values: str) -> Callable[[], str]:
    source = itertools.cycle(values)
    return lambda: next(source)


class Clients:
    """Channels and HTTP client shared by every worker."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.context_channel = grpc.aio.insecure_channel(stack.context.address)
        self.gateway_channel = grpc.aio.insecure_channel(stack.gateway.address)
        self.context = context_grpc.ContextServiceStub(self.context_channel)
        self.gateway = gateway_grpc.GatewayServiceStub(self.gateway_channel)
        self.http = httpx.AsyncClient(timeout=TIMEOUT_SECONDS)

    async def close(self) -> None:
        await self.http.aclose()
        await self.context_channel.close()
        await self.gateway_channel.close()

    async def mcp(self, agent: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        response = await self.http.post(
            self.stack.mcp_url,
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
            headers={
                "Authorization": f"Bearer {self.stack.agent_tokens[agent]}",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
            },
        )
        if response.status_code != 200:
            raise SoakFailure(f"{method}: HTTP {response.status_code}")
        body: dict[str, Any] = response.json()
        if "error" in body:
            raise SoakFailure(f"{method}: JSON-RPC {body['error']['code']}")
        result: dict[str, Any] = body["result"]
        if result.get("isError"):
            raise SoakFailure(f"{method}: {result['_meta'][ERROR_META_KEY]['error']['code']}")
        return result


def operations(clients: Clients) -> list[Operation]:
    """One entry per worker; heavier paths appear once, cheap reads more often."""
    stack = clients.stack
    as_gateway = stack.metadata("gateway")
    as_toolplane = stack.metadata("toolplane")
    as_internal = stack.metadata("internal")
    purpose = _cycle(*PROMPT_PURPOSES)
    view = _cycle(*AGENT_VIEWS)
    learner = _cycle("L-2041-1", "L-2041-3")
    learner_prompt = _cycle(*LEARNER_PROMPTS)
    query = _cycle("phân số", "phương trình bậc nhất", "hình học", "tỉ lệ")

    async def build_context() -> object:
        request = context_pb.BuildContextRequest(learner_id=learner(), purpose=purpose())
        return await clients.context.BuildContext(
            request, metadata=as_gateway, timeout=TIMEOUT_SECONDS
        )

    async def agent_view() -> object:
        request = context_pb.BuildContextRequest(
            learner_id="L-2041-1", purpose=view(), agent_access=PARENT_AGENT
        )
        return await clients.context.BuildContext(
            request, metadata=as_toolplane, timeout=TIMEOUT_SECONDS
        )

    async def search_knowledge() -> object:
        request = context_pb.SearchKnowledgeRequest(query=query(), limit=5)
        return await clients.context.SearchKnowledge(
            request, metadata=as_gateway, timeout=TIMEOUT_SECONDS
        )

    async def check_access() -> object:
        request = context_pb.CheckLearnerAccessRequest(
            user_id="U-2041-P1", learner_id=learner(), resource_scope="*"
        )
        return await clients.context.CheckLearnerAccess(
            request, metadata=as_toolplane, timeout=TIMEOUT_SECONDS
        )

    async def learner_prompt_run() -> object:
        request = gateway_pb.RunPromptRequest(prompt_id=learner_prompt(), learner_id="L-2041-1")
        return await clients.gateway.RunPrompt(
            request, metadata=as_internal, timeout=TIMEOUT_SECONDS
        )

    async def content_prompt_run() -> object:
        request = gateway_pb.RunPromptRequest(
            prompt_id="coral.generate_items",
            variables=_struct(
                {
                    "topic": query(),
                    "subject": "math",
                    "grade": 6,
                    "count": 2,
                    "node_id": "math-06-integers",
                }
            ),
        )
        return await clients.gateway.RunPrompt(
            request, metadata=as_internal, timeout=TIMEOUT_SECONDS
        )

    async def answer() -> object:
        request = gateway_pb.AnswerRequest(question=f"{query()} là gì?")
        return await clients.gateway.Answer(request, metadata=as_internal, timeout=TIMEOUT_SECONDS)

    async def chat_turn() -> object:
        # Each turn is new: the gateway streams the reply and records the turn (RecordTurn).
        request = gateway_pb.StreamPromptRequest(
            prompt_id="tutor.chat_reply",
            session_id=CHAT_SESSION,
            turn_id=f"T-soak-{uuid.uuid4().hex[:12]}",
            user_message=f"Em chưa hiểu {query()}, giải thích giúp em?",
        )
        events = [
            event.WhichOneof("event")
            async for event in clients.gateway.StreamPrompt(
                request, metadata=as_internal, timeout=TIMEOUT_SECONDS
            )
        ]
        if events[-1:] != ["completed"]:
            raise SoakFailure("chat turn ended without a completed event")
        return events

    def tool(agent: str, name: str, arguments: dict[str, Any]) -> Callable[[], Awaitable[object]]:
        return lambda: clients.mcp(agent, "tools/call", {"name": name, "arguments": arguments})

    def tools_list(agent: str) -> Callable[[], Awaitable[object]]:
        return lambda: clients.mcp(agent, "tools/list", {})

    return [
        Operation("BuildContext (prompt purposes)", "context", build_context),
        Operation("BuildContext (agent views)", "context", agent_view),
        Operation("SearchKnowledge", "context", search_knowledge),
        Operation("CheckLearnerAccess", "context", check_access),
        Operation("RunPrompt (learner prompts)", "gateway", learner_prompt_run),
        Operation("RunPrompt (content prompt)", "gateway", content_prompt_run),
        Operation("Answer", "gateway", answer),
        Operation("StreamPrompt chat turn", "gateway", chat_turn),
        Operation("tools/list learning-agent", "toolplane", tools_list("learning-agent")),
        Operation("tools/list research-agent", "toolplane", tools_list("research-agent")),
        Operation(
            "tools/call learner state",
            "toolplane",
            tool("learning-agent", "nemo12.get_learner_learning_state", {"learner_id": "L-2041-1"}),
        ),
        Operation(
            "tools/call learner profile",
            "toolplane",
            tool("learning-agent", "learner.get_profile", {"learner_id": "L-2041-3"}),
        ),
        Operation(
            "tools/call knowledge search",
            "toolplane",
            tool("research-agent", "coral.search_knowledge", {"query": "phân số"}),
        ),
        Operation(
            "tools/call docs search",
            "toolplane",
            tool("research-agent", "docs.search_docs", {"query": "snapshot retention"}),
        ),
        Operation(
            "tools/call application",
            "toolplane",
            tool("engineering-agent", "application.get", {"application_id": "nemo12-web"}),
        ),
    ]
