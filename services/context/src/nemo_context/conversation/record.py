"""RecordTurn: the conversation's write path (finished turns, structured state, summaries).

The gateway records each turn once it has finished, with every message's final status, so a
reply cut mid-stream is stored as ``partial`` and never reused as context, and, for a message
that did not complete, why (``status_reason``: a reply the chat screen stopped is stored as what
the learner saw, with ``GUARDRAIL_REJECTED``). Recording a turn again
replaces its messages: allowed while it is the session's latest turn (a retry or a completion of
it), refused once later turns follow it, since the order of the conversation is already settled.
Everything of one call (messages, state, summary) is written in one transaction bound to the
session's learner: a call that fails writes nothing.

What is stored here is carried into every later bundle of the session, so it is checked now, each
with its own INVALID_ARGUMENT reason: a turn id that names a key linked to the learner or holds
an identifier of the learner's circle (``IDENTIFIER_IN_TURN_ID``), a state whose keys name a
person or hold an identifier, or whose values hold a linked key (``IDENTIFIER_IN_STATE``), a state
larger than :data:`MAX_STATE_CHARS` (``STATE_TOO_LARGE``), a tool summary longer than
:data:`MAX_TOOL_SUMMARY_CHARS` (``TOOL_SUMMARY_TOO_LONG``). The builder masks what was stored
clean and became an identifier later (a key linked afterwards), so no stored value ends a
session.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

import grpc
from google.protobuf import struct_pb2

from nemo_context.conversation import store
from nemo_context.conversation.builder import check_ids, invalid, session_not_found
from nemo_context.conversation.messages import ROLES, STATUSES, TYPES
from nemo_context.errors import service_error
from nemo_context.gate import find_leak
from nemo_context.gate.circle import Circle
from nemo_context.repository import circle_of, linked_identifiers
from nemo_core.db import Pool, learner_transaction
from nemo_core.structs import struct_to_python
from nemo_protos.context.v1 import context_service_pb2 as service_pb
from nemo_protos.context.v1 import conversation_pb2 as pb
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

MAX_MESSAGES_PER_TURN: Final = 64
MAX_TEXT_CHARS: Final = 64_000
MAX_STATE_CHARS: Final = 32_000
"""The state's two documents together, as compact JSON: extracted facts and an agent's place in
its flow, not a transcript."""
MAX_TOOL_SUMMARY_CHARS: Final = 2_000
"""A tool result's summary (the result itself is never stored)."""
_STATUS_REASON: Final = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
"""Why a message did not complete, as the gateway names it (``GUARDRAIL_REJECTED``); the column's
check constraint repeats it (migration 0027)."""


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
    if message.status_reason and (
        message.status == pb.MESSAGE_STATUS_COMPLETED
        or _STATUS_REASON.fullmatch(message.status_reason) is None
    ):
        raise invalid(
            ErrorReason.INVALID_MESSAGE_STATUS,
            "messages[].status_reason must be an upper-case code of at most 64 letters, digits"
            " and underscores, and empty for a completed message",
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
    if len(message.tool_summary) > MAX_TOOL_SUMMARY_CHARS:
        raise invalid(
            ErrorReason.TOOL_SUMMARY_TOO_LONG,
            f"messages[].tool_summary must be at most {MAX_TOOL_SUMMARY_CHARS} characters",
            {**where, "limit_chars": str(MAX_TOOL_SUMMARY_CHARS)},
        )
    return store.NewMessage(
        role=ROLES[message.role],
        type=TYPES[message.type],
        status=STATUSES[message.status],
        content=message.content,
        tool_summary=message.tool_summary or None,
        status_reason=message.status_reason or None,
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
        size = sum(
            len(json.dumps(document, ensure_ascii=False, separators=(",", ":")))
            for document in _state(request.state)
        )
        if size > MAX_STATE_CHARS:
            raise invalid(
                ErrorReason.STATE_TOO_LARGE,
                f"state must be at most {MAX_STATE_CHARS} characters of JSON",
                {"limit_chars": str(MAX_STATE_CHARS)},
            )
    return messages


def _state_keys(struct: struct_pb2.Struct) -> list[str]:
    keys: list[str] = []
    for key, value in struct.fields.items():
        keys.append(key)
        if value.WhichOneof("kind") == "struct_value":
            keys.extend(_state_keys(value.struct_value))
        elif value.WhichOneof("kind") == "list_value":
            for item in value.list_value.values:
                if item.WhichOneof("kind") == "struct_value":
                    keys.extend(_state_keys(item.struct_value))
    return keys


def _check_stored_words(
    request: service_pb.RecordTurnRequest, forbidden: frozenset[str], circle: Circle
) -> None:
    """Refuse what every later bundle of the session would carry: a turn id or a state key with
    a linked key or an identifier in it, a state value with a linked key or a personal field."""
    if find_leak(request.turn_id, forbidden_values=forbidden, circle=circle) is not None:
        raise invalid(
            ErrorReason.IDENTIFIER_IN_TURN_ID,
            "turn_id must not name a person or an internal key",
        )
    if not request.HasField("state"):
        return
    keys = _state_keys(request.state.extracted_info) + _state_keys(request.state.agent_state)
    if (
        find_leak(request.state, forbidden_values=forbidden) is not None
        or find_leak(keys, forbidden_values=forbidden, circle=circle) is not None
    ):
        raise invalid(
            ErrorReason.IDENTIFIER_IN_STATE,
            "state must not carry a field that names a person or an internal key",
        )


def _state(state: pb.ConversationState) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        struct_to_python(state.extracted_info),
        struct_to_python(state.agent_state),
    )


async def record_turn(
    pool: Pool, request: service_pb.RecordTurnRequest, identifier_key: bytes
) -> service_pb.RecordTurnResponse:
    """Store one turn; see the module docstring. Errors write nothing."""
    messages = _validate(request)
    learner_id = await store.session_learner(pool, request.session_id)
    if learner_id is None:
        raise session_not_found()
    session_id, turn_id = request.session_id, request.turn_id
    async with learner_transaction(pool, [learner_id]) as conn:
        forbidden = await linked_identifiers(conn, learner_id) | {learner_id}
        circle = await circle_of(conn, learner_id, identifier_key, forbidden)
        _check_stored_words(request, forbidden, circle)
        try:
            await store.replace_turn(conn, session_id, learner_id, turn_id, messages)
        except store.TurnNotLatestError:
            raise service_error(
                grpc.StatusCode.FAILED_PRECONDITION,
                ErrorReason.TURN_NOT_LATEST,
                "later turns follow this turn; only the latest turn can be recorded again",
            ) from None
        if request.HasField("state"):
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
