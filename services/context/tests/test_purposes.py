"""The purpose table is the policy: rows, limits and reasons as the issue declares them."""

from __future__ import annotations

import dataclasses
import hashlib

import grpc
import pytest

from nemo_context.acl import PURPOSE_KINDS_BY_CALLER, check_purpose_caller
from nemo_context.gate import forbidden_names_in
from nemo_context.purposes import (
    AGENT_VIEW,
    CONVERSATION,
    MASK,
    PROMPT,
    PURPOSES,
    Purpose,
    Slice,
    _table,
    purpose_named,
    purpose_table,
)
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import purpose_pb2

# The table as the policy declares it, in the words of the wire (ListPurposes): kind, slices in
# order, and the mastery, evidence and retention limits.
DECLARED = {
    "item_generation": ("PROMPT", ("profile", "mastery"), (8, 0, 0)),
    "tutor_hint": ("PROMPT", ("profile", "mastery", "recent_evidence"), (5, 10, 0)),
    "plan_explanation": ("PROMPT", ("profile", "mastery", "goal"), (12, 0, 0)),
    "portrait_summary": ("PROMPT", ("profile", "mastery", "goal", "retention"), (12, 0, 10)),
    "tutor_chat": (
        "CONVERSATION",
        (
            "profile",
            "conversation_history",
            "conversation_summary",
            "conversation_state",
            "knowledge",
        ),
        (0, 0, 0),
    ),
    "profile": ("AGENT_VIEW", ("profile", "age"), (0, 0, 0)),
    "context": ("AGENT_VIEW", ("context",), (0, 0, 0)),
    "learning_progress": ("AGENT_VIEW", ("learning_progress",), (0, 0, 0)),
    "competency_profile": ("AGENT_VIEW", ("competency_profile",), (0, 0, 0)),
    "readiness": ("AGENT_VIEW", ("readiness",), (0, 0, 0)),
    "mastery": ("AGENT_VIEW", ("mastery",), (30, 0, 0)),
    "current_plan": ("AGENT_VIEW", ("current_plan",), (0, 0, 0)),
    "next_learning_experience": ("AGENT_VIEW", ("next_experience",), (0, 0, 0)),
    "learning_state": (
        "AGENT_VIEW",
        ("profile", "age", "context", "learning_progress", "readiness", "next_experience"),
        (0, 0, 0),
    ),
}

# The policy version and the digest of the table it names (ListPurposes without the version, in
# deterministic bytes). Any change to a row is a policy change: bump POLICY_VERSION, then record
# the new pair here.
RECORDED_POLICY = (
    "purposes-2026-12.1",
    "9d93cc547b7e5600bdcde964d7c71fa90ef69ede8ad779285d92aa0fbc57ed7a",
)


def _served() -> dict[str, tuple[str, tuple[str, ...], tuple[int, int, int]]]:
    return {
        row.name: (
            purpose_pb2.PurposeKind.Name(row.kind).removeprefix("PURPOSE_KIND_"),
            tuple(row.slices),
            (row.mastery_limit, row.evidence_limit, row.retention_limit),
        )
        for row in purpose_table().purposes
    }


def recorded_policy() -> tuple[str, str]:
    """The policy version and digest the table has now, as ``RECORDED_POLICY`` records them."""
    table = purpose_table()
    version = table.policy_version
    table.ClearField("policy_version")
    return version, hashlib.sha256(table.SerializeToString(deterministic=True)).hexdigest()


def test_every_purpose_declares_its_kind_slices_and_limits_in_order() -> None:
    served = _served()
    changed = "".join(
        f"    {name!r}: {row!r},\n" for name, row in served.items() if DECLARED.get(name) != row
    )
    gone = sorted(set(DECLARED) - set(served))
    assert served == DECLARED, (
        f"the purpose table and DECLARED differ: record these rows in DECLARED\n{changed}"
        + (f"and remove {gone}" if gone else "")
    )
    assert list(served) == list(DECLARED)  # declaration order, as ListPurposes promises


def test_the_table_cannot_change_without_a_new_policy_version() -> None:
    version, digest = recorded_policy()
    if (version, digest) == RECORDED_POLICY:
        return
    assert version != RECORDED_POLICY[0], (
        "the purpose table changed under the same version: bump POLICY_VERSION in "
        "services/context/src/nemo_context/purposes.py, and this test prints the new pair"
    )
    pytest.fail(f"a new policy: record it here as\nRECORDED_POLICY = {(version, digest)!r}")


def test_code_that_reads_the_table_cannot_change_it() -> None:
    with pytest.raises(TypeError):
        PURPOSES["tutor_hint_wide"] = PURPOSES["tutor_hint"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        PURPOSES["tutor_hint"].evidence_limit = 1000  # type: ignore[misc]


def test_a_purpose_declares_exactly_its_slices() -> None:
    hint, items = purpose_named("tutor_hint"), purpose_named("item_generation")
    assert hint.declares(Slice("recent_evidence"))
    assert not items.declares(Slice("recent_evidence"))
    assert not purpose_named("profile").declares(Slice("mastery"))


def test_the_composite_view_holds_its_parts() -> None:
    # Which agent views exist is the tool plane's and this table's to agree on: the
    # registrations contract (tests/contracts/test_registrations.py) checks both ways.
    composite = set(PURPOSES["learning_state"].slices)
    parts = ("profile", "context", "learning_progress", "readiness", "next_learning_experience")
    for part in parts:
        assert set(PURPOSES[part].slices) <= composite, part
    assert PURPOSES["profile"].slices == (Slice.PROFILE, Slice.AGE)


def test_every_row_has_an_arguable_reason_and_no_identifier_slice() -> None:
    for purpose in PURPOSES.values():
        assert len(purpose.reason) > 40, purpose.name
        assert not forbidden_names_in(str(s) for s in purpose.slices)


def test_a_limit_without_its_slice_or_a_slice_without_a_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="go together"):
        Purpose("x", PROMPT, (Slice.PROFILE,), "reason", MASK, mastery_limit=3)
    with pytest.raises(ValueError, match="go together"):
        Purpose("x", PROMPT, (Slice.PROFILE, Slice.RECENT_EVIDENCE), "reason", MASK)
    with pytest.raises(ValueError, match="go together"):
        Purpose("x", AGENT_VIEW, (Slice.READINESS,), "reason", MASK, retention_limit=1)
    # A limit of one is a limit.
    row = Purpose(
        "x",
        PROMPT,
        (Slice.MASTERY, Slice.RETENTION),
        "r",
        MASK,
        mastery_limit=1,
        retention_limit=1,
    )
    assert (row.mastery_limit, row.evidence_limit, row.retention_limit) == (1, 0, 1)


def test_every_row_says_what_an_identifier_in_written_text_does() -> None:
    for action in (
        purpose_pb2.IDENTIFIER_ACTION_UNSPECIFIED,
        purpose_pb2.IdentifierAction.ValueType(7),
    ):
        with pytest.raises(ValueError, match="written_text_identifiers is MASK or REFUSE"):
            Purpose("x", AGENT_VIEW, (Slice.AGE,), "reason", action)
    assert {row.written_text_identifiers for row in PURPOSES.values()} <= {
        purpose_pb2.IDENTIFIER_ACTION_MASK,
        purpose_pb2.IDENTIFIER_ACTION_REFUSE,
    }


def test_a_slice_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="x declares a slice twice"):
        Purpose("x", AGENT_VIEW, (Slice.AGE, Slice.PROFILE, Slice.AGE), "reason", MASK)


CONVERSATION_ONLY = (
    "conversation_history",
    "conversation_summary",
    "conversation_state",
    "knowledge",
)


@pytest.mark.parametrize("slice_name", CONVERSATION_ONLY)
def test_conversation_slices_belong_to_conversation_purposes_alone(slice_name: str) -> None:
    for kind in (PROMPT, AGENT_VIEW):
        with pytest.raises(ValueError, match="x declares a conversation slice"):
            Purpose("x", kind, (Slice.PROFILE, Slice(slice_name)), "reason", MASK)
    chat = Purpose("x", CONVERSATION, (Slice.PROFILE, Slice.AGE, Slice(slice_name)), "reason", MASK)
    assert chat.declares(Slice(slice_name))


@pytest.mark.parametrize("slice_name", ["mastery", "goal", "context", "readiness", "current_plan"])
def test_a_conversation_purpose_declares_only_what_a_conversation_bundle_holds(
    slice_name: str,
) -> None:
    limit = {"mastery_limit": 5} if slice_name == "mastery" else {}
    with pytest.raises(ValueError, match="conversation purpose x declares a slice it cannot hold"):
        Purpose("x", CONVERSATION, (Slice.PROFILE, Slice(slice_name)), "reason", MASK, **limit)


def test_a_purpose_declared_twice_is_refused() -> None:
    row = Purpose("x", AGENT_VIEW, (Slice.AGE,), "reason", MASK)
    with pytest.raises(ValueError, match="purpose x is declared twice"):
        _table([row, Purpose("y", AGENT_VIEW, (Slice.AGE,), "reason", MASK), row])
    assert list(_table([row])) == ["x"]


def test_an_unknown_purpose_is_an_error_never_an_empty_bundle() -> None:
    for name in ("", "tutor-hint", "TUTOR_HINT", "anything"):
        with pytest.raises(ServiceError) as raised:
            purpose_named(name)
        assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.reason == "UNKNOWN_PURPOSE"
        assert "ListPurposes" in raised.value.message  # where the caller finds the names


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
