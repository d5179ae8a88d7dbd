"""Each Python enum the tool plane puts on the wire has exactly the members of its proto enum."""

from __future__ import annotations

from enum import Enum
from typing import Any

import pytest

from nemo_core.proto_enums import from_proto, to_proto
from nemo_protos.toolplane.v1 import approval_pb2, audit_pb2, tool_pb2
from nemo_protos.type.v1 import user_source_pb2
from nemo_toolplane.approvals import ApprovalStatus
from nemo_toolplane.audit.log import CallStatus
from nemo_toolplane.decisions import Decision
from nemo_toolplane.principal import UserSource
from nemo_toolplane.tool_kinds import Mode, Risk

PAIRS: list[tuple[type[Enum], Any, str]] = [
    (Risk, tool_pb2.Risk, "RISK_"),
    (Mode, tool_pb2.ToolMode, "TOOL_MODE_"),
    (Decision, audit_pb2.Decision, "DECISION_"),
    (CallStatus, audit_pb2.CallStatus, "CALL_STATUS_"),
    (ApprovalStatus, approval_pb2.ApprovalStatus, "APPROVAL_STATUS_"),
    (UserSource, user_source_pb2.UserSource, "USER_SOURCE_"),
]


@pytest.mark.parametrize(("python", "proto", "prefix"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_the_python_and_proto_enums_have_the_same_members(
    python: type[Enum], proto: Any, prefix: str
) -> None:
    values: dict[Enum, int] = {member: to_proto(proto, prefix, member) for member in python}
    assert len(set(values.values())) == len(values)
    for member, value in values.items():
        assert from_proto(proto, prefix, python, value) is member
    named = {name for name, _ in proto.items() if not name.endswith("_UNSPECIFIED")}
    assert named == {prefix + member.name for member in python}
