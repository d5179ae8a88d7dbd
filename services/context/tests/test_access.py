"""Learner access over the demo data: every scope, every relation, every source of a user, and no
id probing."""

from __future__ import annotations

from typing import TypeAlias

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_context.access import (
    LearnerFacts,
    Reach,
    RefusalRule,
    ResourceScope,
    check_learner_access,
    decide,
    parse_scope,
)
from nemo_core.db import Pool
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.type.v1 import user_source_pb2 as us

LEARNERS = ("L-2041-1", "L-2041-2", "L-2041-3", "L-2041-10", "L-2041-404")
Basis: TypeAlias = pb.AccessBasis.ValueType

# (user, learner) -> basis under the "user" scope; every pair not listed is denied.
USER_SCOPE_EXPECTED: dict[tuple[str, str], Basis] = {
    # Parent U-2041-P1 owns family F-2041-1: L-2041-1 and L-2041-3, nothing of F-2041-2 or F-2041-3.
    ("U-2041-P1", "L-2041-1"): pb.ACCESS_BASIS_FAMILY_MEMBER,
    ("U-2041-P1", "L-2041-3"): pb.ACCESS_BASIS_FAMILY_MEMBER,
    # U-2041-P4 is a guardian member of F-2041-1, U-2041-G1 a supporter.
    ("U-2041-P4", "L-2041-1"): pb.ACCESS_BASIS_FAMILY_MEMBER,
    ("U-2041-P4", "L-2041-3"): pb.ACCESS_BASIS_FAMILY_MEMBER,
    ("U-2041-G1", "L-2041-1"): pb.ACCESS_BASIS_FAMILY_MEMBER,
    ("U-2041-G1", "L-2041-3"): pb.ACCESS_BASIS_FAMILY_MEMBER,
    ("U-2041-P2", "L-2041-2"): pb.ACCESS_BASIS_FAMILY_MEMBER,
    ("U-2041-P3", "L-2041-10"): pb.ACCESS_BASIS_FAMILY_MEMBER,
    # Guardians outside the family record reach only their own learner.
    ("U-2041-G3", "L-2041-1"): pb.ACCESS_BASIS_GUARDIAN,
    ("U-2041-G2", "L-2041-2"): pb.ACCESS_BASIS_GUARDIAN,
    # The learners' own accounts.
    ("U-2041-L1", "L-2041-1"): pb.ACCESS_BASIS_SELF,
    ("U-2041-L10", "L-2041-10"): pb.ACCESS_BASIS_SELF,
    # Mentor U-2041-M1 is active on L-2041-1 only; U-2041-M2's assignment to L-2041-2 ended;
    # U-2041-M3 has none.
    ("U-2041-M1", "L-2041-1"): pb.ACCESS_BASIS_MENTOR,
    # Staff and administrators reach every existing learner.
    **{
        ("U-2041-S1", learner): pb.ACCESS_BASIS_STAFF
        for learner in ("L-2041-1", "L-2041-2", "L-2041-3", "L-2041-10")
    },
    **{
        ("U-2041-A1", learner): pb.ACCESS_BASIS_STAFF
        for learner in ("L-2041-1", "L-2041-2", "L-2041-3", "L-2041-10")
    },
}
USERS = (
    "U-2041-P1",
    "U-2041-P2",
    "U-2041-P3",
    "U-2041-P4",
    "U-2041-G1",
    "U-2041-G2",
    "U-2041-G3",
    "U-2041-M1",
    "U-2041-M2",
    "U-2041-M3",
    "U-2041-S1",
    "U-2041-A1",
    "U-2041-L1",
    "U-2041-L10",
    "U-2041-NOBODY",
)


UNVOUCHED_SOURCES = (
    us.USER_SOURCE_ASSERTED,
    us.USER_SOURCE_UNSPECIFIED,
    us.USER_SOURCE_NONE,
)


async def check(
    pool: Pool,
    user: str,
    learner: str,
    scope: str,
    source: us.UserSource.ValueType = us.USER_SOURCE_TOKEN,
) -> pb.CheckLearnerAccessResponse:
    request = pb.CheckLearnerAccessRequest(
        user_id=user, learner_id=learner, resource_scope=scope, user_source=source
    )
    return await check_learner_access(pool, request)


@pytest.mark.parametrize("source", [us.USER_SOURCE_TOKEN, us.USER_SOURCE_CALLER])
@pytest.mark.parametrize("user", USERS)
async def test_user_scope_over_the_demo_data(
    context_pool: Pool, user: str, source: us.UserSource.ValueType
) -> None:
    for learner in LEARNERS:
        expected = USER_SCOPE_EXPECTED.get((user, learner), pb.ACCESS_BASIS_UNSPECIFIED)
        response = await check(context_pool, user, learner, "user", source)
        assert (response.allowed, response.basis) == (
            expected != pb.ACCESS_BASIS_UNSPECIFIED,
            expected,
        ), (user, learner)
        assert response.refusal_rule == ("" if response.allowed else RefusalRule.NO_RELATION)


@pytest.mark.parametrize("source", UNVOUCHED_SOURCES)
@pytest.mark.parametrize("user", USERS)
async def test_a_user_the_agent_names_itself_reaches_nobody(
    context_pool: Pool, user: str, source: us.UserSource.ValueType
) -> None:
    # Staff and administrators included: an unbound token plus their id must read nothing.
    for learner in LEARNERS:
        response = await check(context_pool, user, learner, "user", source)
        assert response == pb.CheckLearnerAccessResponse(
            allowed=False, refusal_rule=RefusalRule.USER_NOT_VOUCHED
        ), (user, learner)


@pytest.mark.parametrize("source", UNVOUCHED_SOURCES)
async def test_fixed_scopes_do_not_depend_on_where_the_user_came_from(
    context_pool: Pool, source: us.UserSource.ValueType
) -> None:
    # An asserted user is worth nothing, not less than nothing: scopes that need no user stand.
    assert (await check(context_pool, "U-2041-P2", "L-2041-1", "family:F-2041-1", source)).allowed
    assert (await check(context_pool, "U-2041-S1", "L-2041-2", "learner:L-2041-2", source)).allowed


async def test_user_scope_without_a_user_reaches_nobody(context_pool: Pool) -> None:
    for learner in LEARNERS:
        # L-2041-2 and L-2041-3 have no account of their own: an empty user must not count as
        # "self".
        response = await check(context_pool, "", learner, "user")
        assert not response.allowed
        assert response.basis == pb.ACCESS_BASIS_UNSPECIFIED


@pytest.mark.parametrize(
    ("scope", "allowed_learners", "basis"),
    [
        ("*", {"L-2041-1", "L-2041-2", "L-2041-3", "L-2041-10"}, pb.ACCESS_BASIS_SCOPE_ALL),
        (
            "learner:L-2041-1,learner:L-2041-2",
            {"L-2041-1", "L-2041-2"},
            pb.ACCESS_BASIS_SCOPE_LEARNER_LIST,
        ),
        (
            " learner:L-2041-10 , learner:L-2041-404 ",
            {"L-2041-10"},
            pb.ACCESS_BASIS_SCOPE_LEARNER_LIST,
        ),
        ("family:F-2041-1", {"L-2041-1", "L-2041-3"}, pb.ACCESS_BASIS_SCOPE_FAMILY),
        (
            "family:F-2041-2,family:F-2041-3",
            {"L-2041-2", "L-2041-10"},
            pb.ACCESS_BASIS_SCOPE_FAMILY,
        ),
    ],
)
async def test_fixed_scopes_ignore_the_user(
    context_pool: Pool, scope: str, allowed_learners: set[str], basis: Basis
) -> None:
    for user in ("", "U-2041-M3", "U-2041-P1"):
        for learner in LEARNERS:
            response = await check(context_pool, user, learner, scope)
            assert response.allowed is (learner in allowed_learners), (scope, user, learner)
            expected = basis if learner in allowed_learners else pb.ACCESS_BASIS_UNSPECIFIED
            assert response.basis == expected


async def test_a_missing_learner_looks_exactly_like_a_forbidden_one(context_pool: Pool) -> None:
    for scope in ("user", "family:F-2041-1", "learner:L-2041-1"):
        forbidden = await check(context_pool, "U-2041-P1", "L-2041-2", scope)
        missing = await check(context_pool, "U-2041-P1", "L-2041-404", scope)
        assert not forbidden.allowed
        assert missing == forbidden
        assert missing.SerializeToString() == forbidden.SerializeToString()
    # Even scopes that name the missing id, or every learner, do not confirm it exists.
    assert not (await check(context_pool, "U-2041-S1", "L-2041-404", "learner:L-2041-404")).allowed
    assert not (await check(context_pool, "U-2041-S1", "L-2041-404", "*")).allowed
    assert not (await check(context_pool, "U-2041-S1", "L-2041-404", "user")).allowed


@pytest.mark.parametrize(
    "scope",
    [
        "",
        "users",
        "learner",
        "learner:",
        "learner:L-2041-1,",
        "class:C-1",
        "learner:L 1",
        "*,learner:L-2041-1",
        "user,family:F-2041-1",
    ],
)
async def test_malformed_scopes_are_invalid_arguments(context_pool: Pool, scope: str) -> None:
    with pytest.raises(ServiceError) as caught:
        await check(context_pool, "U-2041-P1", "L-2041-1", scope)
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.reason == "INVALID_RESOURCE_SCOPE"


@pytest.mark.parametrize("learner", ["", "L-2041-1,L-2041-2", "L-2041-1\x00", "L 1", "L-2041-1\n"])
async def test_learner_id_must_be_one_id(context_pool: Pool, learner: str) -> None:
    with pytest.raises(ServiceError) as caught:
        await check(context_pool, "U-2041-P1", learner, "user")
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.reason == "INVALID_LEARNER_ID"


@pytest.mark.parametrize(
    "user", ["U-2041-P1\x00", "U P1", "U-2041-P1,U-2041-P2", "parent@school.vn"]
)
@pytest.mark.parametrize("scope", ["user", "*", "family:F-2041-1"])
async def test_a_user_id_no_user_key_can_be_relates_to_no_learner(
    context_pool: Pool, user: str, scope: str
) -> None:
    # Denied for the user scope (as for any user who may not reach L-2041-1), never an error: the
    # tool plane passes on whatever user id an agent sends. Other scopes do not need a user.
    allowed = (await check(context_pool, user, "L-2041-1", scope)).allowed
    assert allowed is (scope != "user")


def _user_reach(source: us.UserSource.ValueType = us.USER_SOURCE_TOKEN) -> Reach:
    return Reach("U-2041-1", source, (parse_scope("user"),))


def test_the_user_chain_reports_the_first_relation_that_holds() -> None:
    everything = LearnerFacts(
        family_id="F-2041-1",
        is_self=True,
        is_family_member=True,
        is_guardian=True,
        is_staff=True,
        is_active_mentor=True,
    )
    assert decide(_user_reach(), "L-2041-1", everything).basis == pb.ACCESS_BASIS_SELF
    only_mentor = LearnerFacts("F-2041-1", False, False, False, False, True)
    assert decide(_user_reach(), "L-2041-1", only_mentor).basis == pb.ACCESS_BASIS_MENTOR
    staff_and_guardian = LearnerFacts("F-2041-1", False, False, True, True, False)
    assert decide(_user_reach(), "L-2041-1", staff_and_guardian).basis == pb.ACCESS_BASIS_GUARDIAN
    assert not decide(_user_reach(), "L-2041-1", None).allowed
    assert not decide(_user_reach(us.USER_SOURCE_ASSERTED), "L-2041-1", everything).allowed


_KEYS = st.sampled_from(["L-2041-1", "L-2041-2", "F-2041-1", "F-2041-2", "X"])
_SCOPES = st.one_of(
    st.just(ResourceScope(everything=True)),
    st.just(ResourceScope(user=True)),
    st.builds(
        ResourceScope,
        learner_ids=st.frozensets(_KEYS, max_size=3),
        family_ids=st.frozensets(_KEYS, max_size=3),
    ),
)
_FACTS = st.builds(LearnerFacts, family_id=_KEYS, **{
    name: st.booleans()
    for name in (
        "is_self", "is_family_member", "is_guardian", "is_staff", "is_active_mentor"
    )
})  # fmt: skip
_ALL_SOURCES = st.sampled_from(list(us.UserSource.values()))


@given(
    scopes=st.lists(_SCOPES, min_size=1, max_size=3),
    facts=st.none() | _FACTS,
    learner=_KEYS,
    user=st.sampled_from(["U-2041-1", "U-2041-S1", ""]),
    source=st.sampled_from(UNVOUCHED_SOURCES),
)
def test_an_unvouched_user_is_worth_exactly_no_user(
    scopes: list[ResourceScope],
    facts: LearnerFacts | None,
    learner: str,
    user: str,
    source: us.UserSource.ValueType,
) -> None:
    asserted = decide(Reach(user, source, tuple(scopes)), learner, facts)
    nobody = decide(Reach("", us.USER_SOURCE_NONE, tuple(scopes)), learner, facts)
    assert (asserted.allowed, asserted.basis) == (nobody.allowed, nobody.basis)


@given(
    scopes=st.lists(_SCOPES, min_size=1, max_size=3),
    facts=_FACTS,
    learner=_KEYS,
    user=st.sampled_from(["U-2041-1", ""]),
    source=_ALL_SOURCES,
)
def test_no_decision_tells_a_missing_learner_from_one_out_of_reach(
    scopes: list[ResourceScope],
    facts: LearnerFacts,
    learner: str,
    user: str,
    source: us.UserSource.ValueType,
) -> None:
    reach = Reach(user, source, tuple(scopes))
    decided = decide(reach, learner, facts)
    if not decided.allowed:
        # Whatever refused an existing learner refuses a missing one, by the same rules.
        assert decide(reach, learner, None) == decided
    assert not decide(reach, learner, None).allowed


def test_mixed_lists_parse_into_both_kinds() -> None:
    scope = parse_scope("learner:L-2041-1, family:F-2041-2,learner:L-2041-3")
    assert scope == ResourceScope(
        learner_ids=frozenset({"L-2041-1", "L-2041-3"}), family_ids=frozenset({"F-2041-2"})
    )
