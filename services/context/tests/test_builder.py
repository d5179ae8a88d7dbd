"""Building bundles from the seeded database as nemo_context: only declared slices, limits,
weakest first, evidence without answers, isolation between learners, and the gate at the end."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from google.protobuf import text_format

from nemo_context.builder import BUILD_VERSION, ContextBuilder
from nemo_context.gate.masking import ID_MASK
from nemo_context.pseudonym import Pseudonymizer
from nemo_context.purposes import (
    CONVERSATION,
    MASK,
    POLICY_VERSION,
    PURPOSES,
    REFUSE,
    Purpose,
    Slice,
)
from nemo_context.repository import (
    LearnerRecord,
    PostgresLearnerRepository,
    ReadCheck,
    statement_for,
)
from nemo_core.db import Pool, connect
from nemo_core.errors import ServiceError
from nemo_ops.seed_data.progress import EVIDENCE
from nemo_protos.context.v1 import learner_context_pb2 as pb
from nemo_protos.type.v1 import locale_pb2

from .conftest import TEST_IDENTIFIER_KEY, TEST_PSEUDONYM_KEY

BUNDLE_PURPOSES = [name for name, purpose in PURPOSES.items() if purpose.kind != CONVERSATION]
ALWAYS_SET = {
    "learner_ref",
    "purpose",
    "slices",
    "policy_version",
    "build_version",
    "build_time",
    "locale",
    "rendered_text",
}
FIELD_OF_SLICE = {
    Slice.PROFILE: "profile",
    Slice.MASTERY: "mastery",
    Slice.RECENT_EVIDENCE: "recent_evidence",
    Slice.GOAL: "goal",
    Slice.RETENTION: "retention",
    Slice.LEARNING_CONTEXT: "learning_context",
    Slice.LEARNING_PROGRESS: "learning_progress",
    Slice.COMPETENCY_PROFILE: "competency_profile",
    Slice.READINESS: "readiness",
    Slice.CURRENT_PLAN: "current_plan",
    Slice.NEXT_EXPERIENCE: "next_experience",
}
PSEUDONYMS = Pseudonymizer(TEST_PSEUDONYM_KEY.encode())


@pytest.fixture
def builder(context_pool: Pool) -> ContextBuilder:
    return ContextBuilder(
        PostgresLearnerRepository(context_pool, identifier_key=TEST_IDENTIFIER_KEY), PSEUDONYMS
    )


async def _build(builder: ContextBuilder, learner_id: str, purpose: str) -> pb.ContextBundle:
    gated = await builder.build(learner_id, PURPOSES[purpose], locale_pb2.LOCALE_VI)
    return gated.message


def _set_fields(message: pb.ContextBundle) -> set[str]:
    return {field.name for field, _ in message.ListFields()}


@pytest.mark.parametrize("purpose", BUNDLE_PURPOSES)
async def test_each_purpose_takes_only_its_declared_slices(
    builder: ContextBuilder, purpose: str
) -> None:
    bundle = await _build(builder, "L-2041-1", purpose)
    declared = PURPOSES[purpose].slices
    expected = ALWAYS_SET | {FIELD_OF_SLICE[s] for s in declared if s in FIELD_OF_SLICE}
    # L-2041-1 has data for every slice, so each declared slice is present and nothing else is.
    assert _set_fields(bundle) == expected
    assert list(bundle.slices) == [str(s) for s in declared]
    assert bundle.profile.HasField("age_years") == (Slice.AGE in declared)
    assert bundle.policy_version == POLICY_VERSION
    assert bundle.build_version == BUILD_VERSION
    assert bundle.purpose == purpose


@pytest.mark.parametrize(
    "purpose", [name for name in BUNDLE_PURPOSES if PURPOSES[name].declares(Slice.MASTERY)]
)
async def test_mastery_is_weakest_first_and_never_exceeds_the_limit(
    builder: ContextBuilder, purpose: str
) -> None:
    bundle = await _build(builder, "L-2041-1", purpose)
    limit = PURPOSES[purpose].mastery_limit
    values = [entry.mastery for entry in bundle.mastery]
    assert len(values) == min(limit, 15)  # L-2041-1 has 15 mastery rows
    assert values == sorted(values)
    assert values[0] == 0.12  # the weakest node always survives the cut


async def test_tutor_hint_holds_the_five_weakest_nodes_with_separate_measures(
    builder: ContextBuilder,
) -> None:
    bundle = await _build(builder, "L-2041-1", "tutor_hint")
    assert [(e.node_id, e.state) for e in bundle.mastery] == [
        ("math-09-quadratic-equations", pb.KNOWLEDGE_STATE_UNKNOWN),
        ("math-08-thales-theorem", pb.KNOWLEDGE_STATE_UNKNOWN),
        ("math-08-algebraic-identities", pb.KNOWLEDGE_STATE_GAP),
        ("math-08-slope", pb.KNOWLEDGE_STATE_GAP),
        ("math-08-factorization", pb.KNOWLEDGE_STATE_GAP),
    ]
    identities = bundle.mastery[2]
    assert (identities.mastery, identities.confidence, identities.coverage) == (0.35, 0.7, 0.8)
    assert identities.evidence_count == 14
    assert identities.node_title == "Hằng đẳng thức"


async def test_evidence_is_only_correct_and_reliability_never_the_answer(
    builder: ContextBuilder,
) -> None:
    bundle = await _build(builder, "L-2041-1", "tutor_hint")
    evidence = bundle.recent_evidence
    assert len(evidence.items) == 10
    assert (evidence.correct_count, evidence.incorrect_count) == (6, 4)
    times = [item.observe_time.ToDatetime() for item in evidence.items]
    assert times == sorted(times, reverse=True)
    for item in evidence.items:
        assert {f.name for f, _ in item.ListFields()} <= {
            "node_id",
            "correct",
            "reliability",
            "observe_time",
        }
    assert evidence.items[0].reliability == 0.9
    assert not evidence.items[0].correct


@pytest.mark.parametrize("learner_id", ["L-2041-1", "L-2041-2", "L-2041-3"])
async def test_no_verbatim_answer_reaches_any_bundle(
    builder: ContextBuilder, learner_id: str
) -> None:
    # Every verbatim field long enough to be told apart from ordinary words ("B" is an answer).
    answers = [
        text
        for row in EVIDENCE.rows
        if row["learner_id"] == learner_id
        for text in row["payload_json"].values()  # type: ignore[attr-defined]
        if len(text) >= 8
    ]
    assert answers
    for purpose in BUNDLE_PURPOSES:
        serialized = text_format.MessageToString(
            await _build(builder, learner_id, purpose), as_utf8=True
        )
        for answer in answers:
            assert answer not in serialized


async def _fingerprints(builder: ContextBuilder, learner_id: str) -> set[str]:
    """Strings that belong to one learner only: ref, node ids, goal, plan, model wording."""
    found = {PSEUDONYMS.learner_ref(learner_id)}
    for purpose in BUNDLE_PURPOSES:
        bundle = await _build(builder, learner_id, purpose)
        found |= {entry.node_id for entry in bundle.mastery}
        found |= {bundle.goal.title, bundle.current_plan.plan_id, bundle.current_plan.title}
        found |= {bundle.next_experience.reason, bundle.learning_context.package_title}
        found |= {bundle.readiness.milestone}
    return found - {""}


@pytest.mark.parametrize(
    ("a", "b"), [("L-2041-1", "L-2041-3"), ("L-2041-1", "L-2041-2"), ("L-2041-3", "L-2041-1")]
)
async def test_the_bundle_of_b_holds_nothing_of_a(builder: ContextBuilder, a: str, b: str) -> None:
    # L-2041-1 and L-2041-3 are siblings (one family): the strongest case for a widening join.
    of_a = await _fingerprints(builder, a)
    assert len(of_a) > 5
    for purpose in BUNDLE_PURPOSES:
        serialized = text_format.MessageToString(await _build(builder, b, purpose), as_utf8=True)
        assert not {piece for piece in of_a if piece in serialized}, purpose


async def test_learner_ref_is_the_keyed_pseudonym_never_the_id(builder: ContextBuilder) -> None:
    bundle = await _build(builder, "L-2041-1", "profile")
    assert bundle.learner_ref == PSEUDONYMS.learner_ref("L-2041-1")
    assert "L-2041-1" not in bundle.learner_ref


async def test_missing_values_stay_missing_never_zero(builder: ContextBuilder) -> None:
    # L-2041-2 has measures but no computed models; L-2041-10 has nothing measured at all.
    state = await _build(builder, "L-2041-2", "learning_state")
    assert _set_fields(state) == ALWAYS_SET | {"profile", "learning_progress"}
    progress = state.learning_progress
    assert (progress.solid_count, progress.shaky_count, progress.gap_count) == (1, 1, 1)
    for optional in ("coverage", "sessions", "minutes", "items_attempted", "streak_days"):
        assert not progress.HasField(optional)
    assert not progress.HasField("provenance")

    empty = await _build(builder, "L-2041-10", "learning_state")
    assert not empty.learning_progress.HasField("last_activity_time")
    assert empty.learning_progress.unknown_count == 0
    assert len((await _build(builder, "L-2041-10", "mastery")).mastery) == 0

    mastery = await _build(builder, "L-2041-1", "mastery")
    [probability] = [e for e in mastery.mastery if e.node_id == "math-08-experimental-probability"]
    assert not probability.HasField("coverage")  # NULL in the database, not 0


async def test_models_are_the_latest_computed_version(builder: ContextBuilder) -> None:
    readiness = (await _build(builder, "L-2041-1", "readiness")).readiness
    assert readiness.provenance.version == 2
    assert readiness.readiness == 0.58
    assert readiness.confidence == 0.62
    assert [node.node_title for node in readiness.blocking_nodes] == ["Hằng đẳng thức", "Hệ số góc"]
    plan = (await _build(builder, "L-2041-1", "current_plan")).current_plan
    assert [step.position for step in plan.steps] == [1, 2, 3, 4]
    assert plan.steps[1].node_title == "Hằng đẳng thức"
    next_experience = (
        await _build(builder, "L-2041-1", "next_learning_experience")
    ).next_experience
    assert next_experience.reason.startswith("Hai lần sai gần nhất")


async def test_unknown_and_malformed_learners_are_precise_errors(builder: ContextBuilder) -> None:
    with pytest.raises(ServiceError) as missing:
        await _build(builder, "L-2041-404", "tutor_hint")
    assert (missing.value.code, missing.value.reason) == (
        grpc.StatusCode.NOT_FOUND,
        "LEARNER_NOT_FOUND",
    )
    for bad in ("", "L-2041-1,L-2041-2", "L 1", "x" * 200):
        with pytest.raises(ServiceError) as invalid:
            await _build(builder, bad, "tutor_hint")
        assert invalid.value.reason == "INVALID_LEARNER_ID"


class _AlteredRepository:
    """The real repository with its record altered: the seam a broken query would use."""

    def __init__(self, pool: Pool, alter: Any) -> None:
        self._real = PostgresLearnerRepository(pool, identifier_key=TEST_IDENTIFIER_KEY)
        self._alter = alter

    async def read(
        self, learner_id: str, purpose: Purpose, as_of: datetime, *, check: ReadCheck | None = None
    ) -> LearnerRecord | None:
        record = await self._real.read(learner_id, purpose, as_of, check=check)
        assert record is not None
        altered: LearnerRecord = self._alter(record)
        return altered


def _with_learner_id_column(record: LearnerRecord) -> LearnerRecord:
    rows = [{**row, "learner_id": "L-2041-1"} for row in record.mastery]
    return dataclasses.replace(record, mastery=rows)


def _with_name_deep_in_a_model(record: LearnerRecord) -> LearnerRecord:
    model_row = dict(record.models["readiness"])
    model_row["model"] = {**model_row["model"], "by_strand": [{"teacher": {"displayName": "X"}}]}
    return dataclasses.replace(record, models={**record.models, "readiness": model_row})


def _with_raw_id_in_goal_text(record: LearnerRecord) -> LearnerRecord:
    assert record.goal is not None
    return dataclasses.replace(record, goal={**record.goal, "title": "Mục tiêu của L-2041-1."})


def _with_parent_id_in_a_reason(record: LearnerRecord) -> LearnerRecord:
    model_row = dict(record.models["next_experience"])
    model_row["model"] = {**model_row["model"], "reason": "phụ huynh u-2041-p1 yêu cầu"}
    return dataclasses.replace(record, models={**record.models, "next_experience": model_row})


def _with_raw_id_in_a_node_title(record: LearnerRecord) -> LearnerRecord:
    first, *rest = record.mastery
    return dataclasses.replace(
        record, mastery=[{**first, "node_title": f"{first['node_title']} (L-2041-1)"}, *rest]
    )


@pytest.mark.parametrize(
    ("alter", "purpose"),
    [
        (_with_learner_id_column, "tutor_hint"),
        (_with_name_deep_in_a_model, "learning_state"),
        (_with_raw_id_in_a_node_title, "tutor_hint"),
    ],
)
async def test_a_repository_that_leaks_into_a_structured_field_makes_the_build_fail(
    context_pool: Pool, alter: Any, purpose: str
) -> None:
    builder = ContextBuilder(_AlteredRepository(context_pool, alter), PSEUDONYMS)
    with pytest.raises(ServiceError) as raised:
        await builder.build("L-2041-1", PURPOSES[purpose], locale_pb2.LOCALE_VI)
    assert raised.value.code is grpc.StatusCode.INTERNAL
    assert raised.value.reason == "CONTEXT_LEAK_BLOCKED"


@pytest.mark.parametrize(
    ("alter", "purpose", "written"),
    [
        (_with_raw_id_in_goal_text, "plan_explanation", "goal.title"),
        (_with_parent_id_in_a_reason, "next_learning_experience", "next_experience.reason"),
    ],
)
async def test_a_key_in_written_text_is_masked_or_refused_as_the_purpose_declares(
    context_pool: Pool, alter: Any, purpose: str, written: str
) -> None:
    builder = ContextBuilder(_AlteredRepository(context_pool, alter), PSEUDONYMS)
    declared = PURPOSES[purpose]
    assert declared.written_text_identifiers == MASK
    bundle = (await builder.build("L-2041-1", declared, locale_pb2.LOCALE_VI)).message
    message_name, field_name = written.split(".")
    text = getattr(getattr(bundle, message_name), field_name)
    assert ID_MASK in text
    assert ID_MASK in bundle.rendered_text
    assert [(r.kind, r.count) for r in bundle.redactions] == [(pb.IDENTIFIER_KIND_KEY, 1)]
    refusing = dataclasses.replace(declared, written_text_identifiers=REFUSE)
    with pytest.raises(ServiceError) as raised:
        await builder.build("L-2041-1", refusing, locale_pb2.LOCALE_VI)
    assert raised.value.reason == "CONTEXT_LEAK_BLOCKED"


@pytest.mark.parametrize(
    "column", ["l.id AS learner_id", 'l.user_id AS "userId"', "l.family_id AS familyid"]
)
async def test_a_statement_that_selects_a_key_column_fails_the_build(
    context_pool: Pool, column: str
) -> None:
    # The seed's case: a top-level column the builder would never copy must not pass unseen.
    def with_key_column(purpose: Purpose) -> str:
        return statement_for(purpose).replace(
            "SELECT\n    l.grade,", f"SELECT\n    {column},\n    l.grade,"
        )

    repository = PostgresLearnerRepository(
        context_pool, identifier_key=TEST_IDENTIFIER_KEY, statements=with_key_column
    )
    record = await repository.read("L-2041-1", PURPOSES["tutor_hint"], datetime.now(UTC))
    assert record is not None
    assert column.rsplit(" AS ", 1)[1].strip('"') in record.columns  # the key was read
    with pytest.raises(ServiceError) as raised:
        await ContextBuilder(repository, PSEUDONYMS).build(
            "L-2041-1", PURPOSES["tutor_hint"], locale_pb2.LOCALE_VI
        )
    assert (raised.value.code, raised.value.reason) == (
        grpc.StatusCode.INTERNAL,
        "CONTEXT_LEAK_BLOCKED",
    )


async def test_a_node_id_with_a_photo_word_is_data_not_a_photo_field(
    builder: ContextBuilder, owner_dsn: str
) -> None:
    node = "physics-12-photo-electric-effect"
    conn = await connect(owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO knowledge.nodes (id, title, subject, grade, strand)"
            " VALUES ($1, 'Hiệu ứng quang điện', 'physics', 12, 'quantum')",
            node,
        )
        await conn.execute(
            "INSERT INTO learning.learner_model_versions"
            " (learner_id, kind, version, model_json, engine_version)"
            " VALUES ('L-2041-3', 'next_experience', 99, $1, 'test')",
            {"node_id": node, "experience_type": "lesson", "reason": "Đã sẵn sàng"},
        )
        for purpose in ("next_learning_experience", "learning_state"):
            bundle = await _build(builder, "L-2041-3", purpose)
            assert bundle.next_experience.node_title == "Hiệu ứng quang điện", purpose
    finally:
        await conn.execute("DELETE FROM learning.learner_model_versions WHERE version = 99")
        await conn.execute("DELETE FROM knowledge.nodes WHERE id = $1", node)
        await conn.close()


async def test_a_recommendation_without_a_reason_is_left_out(
    builder: ContextBuilder, owner_dsn: str
) -> None:
    conn = await connect(owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO learning.learner_model_versions"
            " (learner_id, kind, version, model_json, engine_version)"
            " VALUES ('L-2041-3', 'next_experience', 99, $1, 'test')",
            {"node_id": "math-05-decimals", "experience_type": "lesson"},
        )
        bundle = await _build(builder, "L-2041-3", "next_learning_experience")
    finally:
        await conn.execute("DELETE FROM learning.learner_model_versions WHERE version = 99")
        await conn.close()
    assert not bundle.HasField("next_experience")
