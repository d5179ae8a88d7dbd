"""A parent's learning agent reads the child's learning state over MCP, then an internal service
asks the gateway for a tutor hint for the same child: one trace, pseudonymous results, an audit
row, and a snapshot that holds exactly what the model saw."""

from __future__ import annotations

import json

from google.protobuf import struct_pb2

from nemo_protos.gateway.v1 import gateway_service_pb2 as gateway_pb
from nemo_protos.gateway.v1 import run_pb2
from nemo_protos.type.v1.locale_pb2 import LOCALE_EN
from nemo_testing.otlp import OtlpReceiver
from nemo_testing.providers import Answer, ScriptedProvider
from tests.stack import Stack

from .support import (
    audit_rows,
    clients,
    identifier_values,
    journey_span,
    leaked,
    mcp_client,
    services_in_trace,
    snapshot,
)

HINT = "Think about what the middle term of the square must be."


async def test_parent_agent_state_then_tutor_hint_stay_pseudonymous_in_one_trace(
    stack: Stack, scripted_provider: ScriptedProvider, otlp_receiver: OtlpReceiver
) -> None:
    forbidden = await identifier_values(
        stack.owner_dsn, {"learning.learners": "L-2041-1", "learning.users": "U-2041-P1"}
    ) | {"L-2041-1", "U-2041-P1", "F-2041-1"}
    scripted_provider.reset()
    scripted_provider.script(Answer(json.dumps({"hint": HINT})))
    request_id = "REQ-journey-parent-hint"
    variables = struct_pb2.Struct()
    variables.update({"node_id": "math-08-algebraic-identities"})

    with journey_span("parent asks, tutor hints") as trace_id:
        async with mcp_client(
            stack, stack.agent_tokens["learning-agent"], {"X-Request-Id": request_id}
        ) as agent:
            state = await agent.call_tool(
                "nemo12.get_learner_learning_state", {"learner_id": "L-2041-1"}
            )
        async with clients(stack) as grpc_clients:
            hint = await grpc_clients.gateway.RunPrompt(
                # The scripted hint is English: the prompt declares its language.
                gateway_pb.RunPromptRequest(
                    prompt_id="learner.tutor_hint",
                    learner_id="L-2041-1",
                    variables=variables,
                    locale=LOCALE_EN,
                ),
                timeout=20,
            )
            stored = await snapshot(grpc_clients, hint.run.input_ref)

    # The agent's view: the child's state under a pseudonym, no identifier.
    assert not state.is_error, state.structured_content
    learning_state = state.structured_content
    assert learning_state["learner_ref"].startswith("nemo_")
    state_text = json.dumps(learning_state, ensure_ascii=False).replace("L-2041-10", "")
    assert leaked(state_text, forbidden) == set()

    # The hint: the model's answer, taken from a prompt built on the pseudonymous bundle.
    assert hint.run.path == run_pb2.RUN_PATH_MODEL
    assert hint.output.tutor_hint.hint == HINT
    [model_request] = scripted_provider.requests
    prompt_text = "\n".join(str(message["content"]) for message in model_request.json()["messages"])
    assert leaked(prompt_text.replace("L-2041-10", ""), forbidden) == set()
    assert leaked(str(hint.output).replace("L-2041-10", ""), forbidden) == set()

    # The snapshot behind input_ref is the bundle the model saw, under the same pseudonym the
    # agent got.
    assert hint.run.input_ref
    bundle = stored.bundle
    assert bundle.rendered_text
    assert bundle.rendered_text in prompt_text
    assert bundle.learner_ref == learning_state["learner_ref"]
    assert leaked(stored.canonical_json.decode().replace("L-2041-10", ""), forbidden) == set()

    # The tool call is audited against the real learner, for the parent, as allowed.
    [row] = await audit_rows(stack.owner_dsn, request_id=request_id)
    assert (row["agent_id"], row["user_id"], row["resource"]) == (
        "learning-agent",
        "U-2041-P1",
        "learner:L-2041-1",
    )
    assert (row["decision"], row["status"]) == ("allow", "success")

    # One trace from the test's span through the tool plane, the gateway and the context service.
    spans = await services_in_trace(otlp_receiver, trace_id, {"toolplane", "gateway", "context"})
    assert {span.trace_id for span in spans} == {trace_id}
