"""A mentor's agent reaches only the learner of an active assignment; an inactive assignment
reaches nothing. Every attempt is audited, and the calls share the journey's trace."""

from __future__ import annotations

from nemo_testing.otlp import OtlpReceiver
from nemo_toolplane.mcp.endpoint import ERROR_META_KEY
from tests.stack import Stack

from .support import audit_rows, journey_span, mcp_client, services_in_trace

LEARNERS = ("L-2041-1", "L-2041-2", "L-2041-3")
#: token name -> the learners it may read (U-2041-M1 is active on L-2041-1; U-2041-M2's
#: L-2041-2 assignment ended).
REACH = {"mentor-active": {"L-2041-1"}, "mentor-inactive": set[str]()}
MENTOR_OF = {"mentor-active": "U-2041-M1", "mentor-inactive": "U-2041-M2"}


async def test_mentors_reach_only_their_active_assignments(
    stack: Stack, otlp_receiver: OtlpReceiver
) -> None:
    outcomes: dict[tuple[str, str], str] = {}
    with journey_span("mentors read learners") as trace_id:
        for token_name in REACH:
            for learner_id in LEARNERS:
                request_id = f"REQ-journey-{token_name}-{learner_id}"
                async with mcp_client(
                    stack, stack.agent_tokens[token_name], {"X-Request-Id": request_id}
                ) as agent:
                    result = await agent.call_tool(
                        "nemo12.get_learner_learning_state", {"learner_id": learner_id}
                    )
                outcomes[token_name, learner_id] = (
                    (result.meta or {})[ERROR_META_KEY]["error"]["code"]
                    if result.is_error
                    else result.structured_content["view"]
                )

    assert outcomes == {
        (token_name, learner_id): (
            "learning_state" if learner_id in reach else "AUTHORIZATION_ERROR"
        )
        for token_name, reach in REACH.items()
        for learner_id in LEARNERS
    }
    for token_name, reach in REACH.items():
        for learner_id in LEARNERS:
            [row] = await audit_rows(
                stack.owner_dsn, request_id=f"REQ-journey-{token_name}-{learner_id}"
            )
            assert (row["user_id"], row["resource"]) == (
                MENTOR_OF[token_name],
                f"learner:{learner_id}",
            )
            expected = ("allow", "success") if learner_id in reach else ("deny", "denied")
            assert (row["decision"], row["status"]) == expected, (token_name, learner_id)

    # The allowed read went on to the context service within the same trace.
    spans = await services_in_trace(otlp_receiver, trace_id, {"toolplane", "context"})
    assert {span.trace_id for span in spans} == {trace_id}
