"""The purpose table is the policy: rows, limits and reasons as the issue declares them."""

from __future__ import annotations

import grpc
import pytest

from nemo_context.acl import PURPOSE_KINDS_BY_CALLER, check_purpose_caller
from nemo_context.gate import forbidden_names_in
from nemo_context.purposes import (
    AGENT_VIEW,
    PROMPT,
    PURPOSES,
    Purpose,
    Slice,
    purpose_named,
    purpose_table,
)
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import purpose_pb2


@pytest.mark.parametrize(
    ("name", "slices", "mastery", "evidence", "retention"),
    [
        ("item_generation", ("profile", "mastery"), 8, 0, 0),
        ("tutor_hint", ("profile", "mastery", "recent_evidence"), 5, 10, 0),
        ("plan_explanation", ("profile", "mastery", "goal"), 12, 0, 0),
        ("portrait_summary", ("profile", "mastery", "goal", "retention"), 12, 0, 10),
    ],
)
def test_prompt_purposes_declare_their_slices_and_limits(
    name: str, slices: tuple[str, ...], mastery: int, evidence: int, retention: int
) -> None:
    purpose = PURPOSES[name]
    assert purpose.kind == PROMPT
    assert tuple(purpose.slices) == slices
    assert (purpose.mastery_limit, purpose.evidence_limit, purpose.retention_limit) == (
        mastery,
        evidence,
        retention,
    )


def test_agent_views_cover_every_learner_tool_and_the_composite() -> None:
    views = {name for name, purpose in PURPOSES.items() if purpose.kind == AGENT_VIEW}
    assert views == {
        "profile",
        "context",
        "learning_progress",
        "competency_profile",
        "readiness",
        "mastery",
        "current_plan",
        "next_learning_experience",
        "learning_state",
    }
    composite = set(PURPOSES["learning_state"].slices)
    for part in ("profile", "context", "learning_progress", "readiness"):
        assert set(PURPOSES[part].slices) <= composite
    assert set(PURPOSES["next_learning_experience"].slices) <= composite
    assert PURPOSES["profile"].slices == (Slice.PROFILE, Slice.AGE)


def test_every_row_has_an_arguable_reason_and_no_identifier_slice() -> None:
    for purpose in PURPOSES.values():
        assert len(purpose.reason) > 40, purpose.name
        assert not forbidden_names_in(str(s) for s in purpose.slices)


def test_a_limit_without_its_slice_or_a_slice_without_a_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="go together"):
        Purpose("x", PROMPT, (Slice.PROFILE,), "reason", mastery_limit=3)
    with pytest.raises(ValueError, match="go together"):
        Purpose("x", PROMPT, (Slice.PROFILE, Slice.RECENT_EVIDENCE), "reason")


def test_an_unknown_purpose_is_an_error_never_an_empty_bundle() -> None:
    for name in ("", "tutor-hint", "TUTOR_HINT", "anything"):
        with pytest.raises(ServiceError) as raised:
            purpose_named(name)
        assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.reason == "UNKNOWN_PURPOSE"


def test_purpose_table_message_mirrors_the_rows() -> None:
    table = purpose_table()
    assert [row.name for row in table.purposes] == list(PURPOSES)
    state = next(row for row in table.purposes if row.name == "learning_state")
    assert state.kind == purpose_pb2.PURPOSE_KIND_AGENT_VIEW
    assert state.mastery_limit == 0


def test_callers_build_only_their_kinds_of_purpose() -> None:
    allowed = {
        (caller, name)
        for caller in ("gateway", "toolplane", "audit")
        for name, purpose in PURPOSES.items()
        if purpose.kind in PURPOSE_KINDS_BY_CALLER.get(caller, frozenset())
    }
    for caller in ("gateway", "toolplane", "audit"):
        for name, purpose in PURPOSES.items():
            if (caller, name) in allowed:
                check_purpose_caller(caller, purpose)
                continue
            with pytest.raises(ServiceError) as raised:
                check_purpose_caller(caller, purpose)
            assert raised.value.reason == "PURPOSE_NOT_ALLOWED"
    assert ("gateway", "tutor_chat") in allowed
    assert ("gateway", "learning_state") not in allowed
    assert ("toolplane", "tutor_hint") not in allowed
    assert not any(caller == "audit" for caller, _ in allowed)
