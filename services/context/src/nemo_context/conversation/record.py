"""RecordTurn: the conversation's write path (finished turns, structured state, summaries).

The gateway records each turn once it has finished, with every message's final status, so a
reply cut mid-stream is stored as ``partial`` and never reused as context. Recording a turn again
replaces its messages: allowed while it is the session's latest turn (a retry or a completion of
it), refused once later turns follow it, since the order of the conversation is already settled.
Everything of one call (messages, state, summary) is written in one transaction bound to the
session's learner: a call that fails writes nothing. A state the identifier gate would refuse is
refused here (INVALID_ARGUMENT), since the builder never masks state and a stored one would fail
every later turn.
"""

from __future__ import annotations

import math
from typing import Any, Final

import grpc
from google.protobuf import struct_pb2

from nemo_context.conversation import store
from nemo_context.conversation.builder import check_ids, invalid, session_not_found
from nemo_context.conversation.messages import ROLES, STATUSES, TYPES
from nemo_context.errors import service_error
from nemo_context.gate import find_leak
from nemo_context.repository import linked_identifiers
from nemo_core.db import Pool, learner_transaction
from nemo_core.structs import struct_to_python
from nemo_protos.context.v1 import context_service_pb2 as service_pb
from nemo_protos.context.v1 import conversation_pb2 as pb
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

MAX_MESSAGES_PER_TURN: Final = 64
MAX_TEXT_CHARS: Final = 64_000


def _check_text(value: str, what: str, index: int | None = None) -> None:
    # PostgreSQL text cannot hold NUL; refusing it here keeps the error precise.
    if len(value) > MAX_TEXT_CHARS or "\x00" in value:
        raise invalid(
            ErrorReason.INVALID_TEXT,
            f"{what} must be at most {MAX_TEXT_CHARS} characters and contain no NUL",
            {} if index is None else {"index": str(index)},
        )


def _message(index: int, message: pb.TurnMessage) -> store.NewMessage:
    where = {"index": str(index)}
    if message.role not in ROLES:
        raise invalid(
            ErrorReason.INVALID_MESSAGE_ROLE,
            "messages[].role must be USER, ASSISTANT, TOOL or SYSTEM",
            where,
        )
    if message.type not in TYPES:
        raise invalid(
            ErrorReason.INVALID_MESSAGE_TYPE,
            "messages[].type must be TEXT, TOOL_RESULT or UI_EVENT",
            where,
        )
    if message.status not in STATUSES:
        raise invalid(
            ErrorReason.INVALID_MESSAGE_STATUS,
            "messages[].status must be PENDING, COMPLETED, FAILED, PARTIAL or CANCELLED",
            where,
        )
    is_tool_result = message.type == pb.MESSAGE_TYPE_TOOL_RESULT
    if is_tool_result != (message.role == pb.MESSAGE_ROLE_TOOL) or (
        message.tool_summary and not is_tool_result
    ):
        raise invalid(
            ErrorReason.INVALID_TOOL_RESULT,
            "tool results, and only they, have role TOOL; only they carry a tool_summary",
            where,
        )
    _check_text(message.content, "messages[].content", index)
    _check_text(message.tool_summary, "messages[].tool_summary", index)
    return store.NewMessage(
        role=ROLES[message.role],
        type=TYPES[message.type],
        status=STATUSES[message.status],
        content=message.content,
        tool_summary=message.tool_summary or None,
    )


def _check_state_value(value: struct_pb2.Value) -> None:
    kind = value.WhichOneof("kind")
    if kind is None:
        raise invalid(ErrorReason.INVALID_STATE, "state values must have a kind set")
    if kind == "number_value" and not math.isfinite(value.number_value):
        raise invalid(ErrorReason.INVALID_STATE, "state numbers must be finite")
    if kind == "string_value" and "\x00" in value.string_value:
        raise invalid(ErrorReason.INVALID_STATE, "state strings must contain no NUL")
    if kind == "struct_value":
        _check_state_struct(value.struct_value)
    elif kind == "list_value":
        for item in value.list_value.values:
            _check_state_value(item)


def _check_state_struct(struct: struct_pb2.Struct) -> None:
    # PostgreSQL's jsonb holds neither NUL nor non-finite numbers, and a value without a kind is
    # no JSON at all; refusing them here keeps the error precise.
    for key, value in struct.fields.items():
        if "\x00" in key:
            raise invalid(ErrorReason.INVALID_STATE, "state keys must contain no NUL")
        _check_state_value(value)


def _validate(request: service_pb.RecordTurnRequest) -> list[store.NewMessage]:
    check_ids(request.session_id, request.turn_id)
    if not request.messages:
        raise invalid(ErrorReason.NO_MESSAGES, "a turn has at least one message")
    if len(request.messages) > MAX_MESSAGES_PER_TURN:
        raise invalid(
            ErrorReason.TOO_MANY_MESSAGES, f"a turn has at most {MAX_MESSAGES_PER_TURN} messages"
        )
    messages = [_message(index, message) for index, message in enumerate(request.messages)]
    if request.HasField("summary"):
        if not request.summary.summary.strip():
            raise invalid(ErrorReason.INVALID_SUMMARY, "summary.summary must not be empty")
        _check_text(request.summary.summary, "summary.summary")
    if request.HasField("state"):
        _check_state_struct(request.state.extracted_info)
        _check_state_struct(request.state.agent_state)
    return messages


def _state(state: pb.ConversationState) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        struct_to_python(state.extracted_info),
        struct_to_python(state.agent_state),
    )


async def record_turn(
    pool: Pool, request: service_pb.RecordTurnRequest
) -> service_pb.RecordTurnResponse:
    """Store one turn; see the module docstring. Errors write nothing."""
    messages = _validate(request)
    learner_id = await store.session_learner(pool, request.session_id)
    if learner_id is None:
        raise session_not_found()
    session_id, turn_id = request.session_id, request.turn_id
    async with learner_transaction(pool, [learner_id]) as conn:
        try:
            await store.replace_turn(conn, session_id, learner_id, turn_id, messages)
        except store.TurnNotLatestError:
            raise service_error(
                grpc.StatusCode.FAILED_PRECONDITION,
                ErrorReason.TURN_NOT_LATEST,
                "later turns follow this turn; only the latest turn can be recorded again",
            ) from None
        if request.HasField("state"):
            # Every later build would refuse such a state, and nothing else ever replaces it:
            # stored, it would end the session.
            forbidden = await linked_identifiers(conn, learner_id)
            if find_leak(request.state, forbidden_values=forbidden | {learner_id}) is not None:
                raise invalid(
                    ErrorReason.IDENTIFIER_IN_STATE,
                    "state must not carry a field that names a person or an internal key",
                )
            await store.write_state(conn, session_id, learner_id, *_state(request.state))
        if request.HasField("summary"):
            try:
                await store.add_summary(
                    conn,
                    session_id,
                    learner_id,
                    request.summary.summary,
                    request.summary.covers_through_turn_id or turn_id,
                )
            except store.UnknownSummaryTurnError:
                raise invalid(
                    ErrorReason.UNKNOWN_SUMMARY_TURN,
                    "summary.covers_through_turn_id names no turn of this session",
                ) from None
        summary_version = await store.latest_summary_version(conn, session_id, learner_id)
    return service_pb.RecordTurnResponse(
        stored_message_count=len(messages), summary_version=summary_version
    )
