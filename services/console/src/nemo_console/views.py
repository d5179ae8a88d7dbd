"""The services' messages as pages show them: plain values, times in UTC, a readable summary of
what an approval would let run, and a name for each status."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from nemo_protos.toolplane.v1 import approval_pb2, audit_pb2
from nemo_protos.type.v1 import user_source_pb2

#: Longest readable summary of an approval's arguments.
SUMMARY_CHARS = 200


def moment(stamp: Timestamp) -> datetime | None:
    """A timestamp as an aware datetime; None when unset."""
    if stamp.seconds == 0 and stamp.nanos == 0:
        return None
    return stamp.ToDatetime(UTC)


def shown(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""


def summary(tool_id: str, arguments_json: str) -> str:
    """What the call would do, in one line: the tool and its arguments, name = value."""
    try:
        arguments = json.loads(arguments_json) if arguments_json else None
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        return tool_id.split(":")[0]
    parts = ", ".join(
        f"{name} = {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
        for name, value in sorted(arguments.items())
    )
    text = f"{tool_id.split(':')[0]}: {parts}"
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _source(value: user_source_pb2.UserSource.ValueType) -> str:
    name = user_source_pb2.UserSource.Name(value) if value else "USER_SOURCE_NONE"
    return name.removeprefix("USER_SOURCE_").lower()


def approval_view(approval: approval_pb2.Approval) -> dict[str, Any]:
    deadline = moment(approval.decide_deadline) or moment(approval.expire_time)
    return {
        "approval_id": approval.approval_id,
        "tool_id": approval.tool_id,
        "agent_id": approval.agent_id,
        "user_id": approval.user_id,
        "user_source": _source(approval.user_source),
        "digest": approval.arguments_sha256,
        "summary": summary(approval.tool_id, approval.arguments_json),
        "arguments": approval.arguments_json,
        "resource": approval.resource,
        "status": approval_pb2.ApprovalStatus.Name(approval.status)
        .removeprefix("APPROVAL_STATUS_")
        .lower(),
        "policy": approval.policy_version,
        "approvers": list(approval.approvers),
        "token_issued_by": approval.token_issued_by,
        "decided_by": approval.decided_by,
        "note": approval.decision_note,
        "created": shown(moment(approval.create_time)),
        "deadline": deadline,
        "deadline_shown": shown(deadline),
        "deadline_iso": deadline.isoformat() if deadline else "",
    }


def audit_row(entry: audit_pb2.AuditEntry) -> dict[str, Any]:
    return {
        "time": shown(moment(entry.create_time)),
        "request_id": entry.request_id,
        "agent_id": entry.agent_id,
        "user_id": entry.user_id,
        "user_source": _source(entry.user_source),
        "tool_id": entry.tool_id,
        "resource": entry.resource,
        "decision": audit_pb2.Decision.Name(entry.decision).removeprefix("DECISION_").lower(),
        "status": audit_pb2.CallStatus.Name(entry.status).removeprefix("CALL_STATUS_").lower(),
        "error_code": entry.error_code,
        "duration_ms": round(entry.duration.ToTimedelta().total_seconds() * 1000, 1),
        "credential_kind": audit_pb2.CredentialKind.Name(entry.credential_kind)
        .removeprefix("CREDENTIAL_KIND_")
        .lower(),
        "client_id": entry.client_id,
        "token_id": entry.token_id,
        "input_ref": entry.input_ref,
    }


def remaining(deadline: datetime | None, now: datetime | None = None) -> str:
    """Time left until ``deadline`` as minutes and seconds; "0:00" once past."""
    if deadline is None:
        return ""
    seconds = max(0, int((deadline - (now or datetime.now(UTC))).total_seconds()))
    return f"{seconds // 60}:{seconds % 60:02d}"
