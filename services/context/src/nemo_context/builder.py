"""Builds a learner's ContextBundle for one declared purpose, and nothing but its slices.

The bundle is pseudonymous (``learner_ref``), minimised (only declared slices, cut at the
purpose's limits), keeps the five measures apart (coverage, mastery, evidence, confidence,
readiness), copies computed learner models instead of recomputing them (see ``slices``), leaves
missing values unset instead of 0, and ends in the identifier gate: :meth:`ContextBuilder.build`
returns a :class:`~nemo_context.gate.Gated` bundle or raises.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

import grpc

from nemo_context import slices
from nemo_context.access import (
    Decision,
    Reach,
    RefusalRule,
    agent_reach,
    authorize,
    out_of_reach,
)
from nemo_context.acl import check_purpose_caller
from nemo_context.errors import service_error
from nemo_context.gate import (
    Gated,
    LeakFinding,
    find_forbidden_name,
    forbidden_names_in,
    gate,
    leak_blocked,
    record_block,
)
from nemo_context.gate.masking import TextMasker
from nemo_context.gate.rules import WRITTEN_TEXT_FIELDS
from nemo_context.gate.text import value_matcher
from nemo_context.ids import check_learner_id
from nemo_context.pseudonym import Pseudonymizer
from nemo_context.purposes import (
    AGENT_VIEW,
    CONVERSATION,
    MASK,
    POLICY_VERSION,
    Purpose,
    Slice,
    purpose_named,
)
from nemo_context.render import render_bundle
from nemo_context.repository import LearnerRecord, LearnerRepository
from nemo_context.snapshots.store import SnapshotStore, with_snapshot
from nemo_core.db import Connection
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import context_service_pb2
from nemo_protos.context.v1 import learner_context_pb2 as pb
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason
from nemo_protos.type.v1 import locale_pb2

BUILD_VERSION: Final = "context-builder-1"
"""Version of this builder and renderer; bundles and snapshots carry it."""


# Unreachable in practice (access is decided in the read's transaction), but a learner gone
# after an allowed check still gets the one refusal agents see.
_NO_LEARNER: Final = Decision(
    context_service_pb2.ACCESS_BASIS_UNSPECIFIED, RefusalRule.NOT_IN_SCOPE
)


def learner_not_found() -> ServiceError:
    """The error for a learner that does not exist."""
    return service_error(
        grpc.StatusCode.NOT_FOUND, ErrorReason.LEARNER_NOT_FOUND, "no such learner"
    )


class ContextBuilder:
    """Reads a learner through a repository and assembles the gated bundle of one purpose."""

    def __init__(
        self,
        repository: LearnerRepository,
        pseudonymizer: Pseudonymizer,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._repository = repository
        self._pseudonymizer = pseudonymizer
        self._clock = clock

    async def build(
        self,
        learner_id: str,
        purpose: Purpose,
        locale: locale_pb2.Locale.ValueType,
        *,
        as_of: datetime | None = None,
        reach: Reach | None = None,
    ) -> Gated[pb.ContextBundle]:
        """The gated bundle of ``learner_id`` for ``purpose``, rendered in ``locale``, as of
        ``as_of`` (the server's clock when None).

        With ``reach`` (agent views), access is decided in the transaction that reads the
        learner, before its data is read: a learner out of reach and one that does not exist
        are the same PERMISSION_DENIED / ``LEARNER_OUT_OF_REACH``.
        """
        check_learner_id(learner_id)
        if locale not in locale_pb2.Locale.values():
            raise service_error(
                grpc.StatusCode.INVALID_ARGUMENT,
                ErrorReason.INVALID_LOCALE,
                "locale must be LOCALE_VI or LOCALE_EN (or unset for Vietnamese)",
            )
        check = None
        if reach is not None:
            granted = reach

            async def check(conn: Connection) -> None:
                decision = await authorize(conn, learner_id, granted)
                if not decision.allowed:
                    raise out_of_reach(decision)

        built_at = as_of or self._clock()
        record = await self._repository.read(learner_id, purpose, built_at, check=check)
        if record is None:
            raise learner_not_found() if reach is None else out_of_reach(_NO_LEARNER)
        _refuse_identifier_columns(record)
        bundle = assemble(
            record,
            purpose,
            learner_ref=self._pseudonymizer.learner_ref(learner_id),
            built_at=built_at,
            locale=locale if locale != locale_pb2.LOCALE_UNSPECIFIED else locale_pb2.LOCALE_VI,
        )
        forbidden = record.linked_ids | {learner_id}
        if purpose.written_text_identifiers == MASK:
            # Text a person wrote is masked before it is rendered, so the rendered text carries
            # the placeholders too; the gate then refuses whatever is left anywhere.
            masker = TextMasker(value_matcher(tuple(sorted(forbidden))), record.circle)
            masker.fields(bundle, WRITTEN_TEXT_FIELDS)
            bundle.redactions.extend(masker.redactions())
        bundle.rendered_text = render_bundle(bundle)
        return gate(bundle, forbidden_values=forbidden, circle=record.circle)


async def build_context(
    builder: ContextBuilder,
    snapshots: SnapshotStore,
    request: context_service_pb2.BuildContextRequest,
    *,
    caller: str,
) -> Gated[pb.ContextBundle]:
    """BuildContext: the gated bundle of a declared purpose the caller may build, with its
    snapshot reference when ``persist`` is set and the snapshot could be written.

    The snapshot holds the gated bundle exactly as returned, minus ``input_ref`` and
    ``snapshot_sha256`` (which name the snapshot itself); a failed write returns the bundle
    with both empty.
    """
    purpose = purpose_named(request.purpose)
    check_purpose_caller(caller, purpose)
    if purpose.kind == CONVERSATION:
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.WRONG_PURPOSE_KIND,
            "conversation purposes are built with BuildConversationContext",
        )
    has_access = request.HasField("agent_access")
    reach = None
    if purpose.kind == AGENT_VIEW:
        reach = agent_reach(request.agent_access, present=has_access)
    elif has_access:
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.AGENT_ACCESS_NOT_APPLICABLE,
            "agent_access applies to agent views only",
        )
    as_of = evaluate_time(request)
    bundle = await builder.build(
        request.learner_id, purpose, request.locale, as_of=as_of, reach=reach
    )
    return await with_snapshot(snapshots, bundle, request.learner_id) if request.persist else bundle


def evaluate_time(request: context_service_pb2.BuildContextRequest) -> datetime | None:
    """The request's evaluation time; INVALID_ARGUMENT outside the Timestamp range."""
    if not request.HasField("evaluate_time"):
        return None
    try:
        return request.evaluate_time.ToDatetime(tzinfo=UTC)
    except ValueError:
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.INVALID_EVALUATE_TIME,
            "evaluate_time must fall in years 1 to 9999 with nanos in 0 to 999999999",
        ) from None


_NOT_COLUMNS: Final = frozenset({"linked_ids", "circle", "columns"})
"""Fields of a record that hold no column value."""


def _refuse_identifier_columns(record: LearnerRecord) -> None:
    """Fail the build when the repository returned a column with a forbidden name, at the top
    of the row (``l.id AS learner_id``) or inside its JSON.

    The builder copies only the columns it knows, so such a column would be dropped, not leaked;
    but a query that selects it is broken, and failing loudly is what gets it fixed.
    """
    finding: LeakFinding | None = None
    if forbidden_names_in(record.columns):
        finding = LeakFinding("field_name", "row")
    else:
        columns = {name: value for name, value in vars(record).items() if name not in _NOT_COLUMNS}
        # node_titles is keyed by knowledge node ids, which are data, not field names: a topic
        # such as "it-10-photo-editing" must not read as a photo field.
        columns["models"] = {
            kind: {**row, "node_titles": list((row.get("node_titles") or {}).values())}
            for kind, row in record.models.items()
        }
        finding = find_forbidden_name(columns)
    if finding is not None:
        record_block(finding)
        raise leak_blocked()


def assemble(  # noqa: C901  one independent guard per slice
    record: LearnerRecord,
    purpose: Purpose,
    *,
    learner_ref: str,
    built_at: datetime,
    locale: locale_pb2.Locale.ValueType,
) -> pb.ContextBundle:
    """The bundle of ``purpose`` from ``record``, without rendered text; only declared slices."""
    bundle = pb.ContextBundle(
        learner_ref=learner_ref,
        purpose=purpose.name,
        slices=[str(slice_) for slice_ in purpose.slices],
        policy_version=POLICY_VERSION,
        build_version=BUILD_VERSION,
        build_time=slices.timestamp(built_at),
        locale=locale,
    )
    if purpose.declares(Slice.PROFILE):
        bundle.profile.grade = record.grade
        if purpose.declares(Slice.AGE) and record.age_years is not None:
            bundle.profile.age_years = record.age_years
    if purpose.declares(Slice.MASTERY):
        bundle.mastery.extend(
            slices.mastery_entry(row) for row in record.mastery[: purpose.mastery_limit]
        )
    if purpose.declares(Slice.RECENT_EVIDENCE):
        bundle.recent_evidence.CopyFrom(
            slices.evidence_summary(record.evidence[: purpose.evidence_limit])
        )
    if purpose.declares(Slice.GOAL) and record.goal is not None:
        bundle.goal.CopyFrom(slices.goal(record.goal))
    if purpose.declares(Slice.RETENTION):
        bundle.retention.extend(
            slices.retention_entry(row) for row in record.retention[: purpose.retention_limit]
        )
    models = record.models
    if purpose.declares(Slice.LEARNING_CONTEXT) and "context" in models:
        bundle.learning_context.CopyFrom(slices.learning_context(models["context"]))
    if purpose.declares(Slice.LEARNING_PROGRESS):
        bundle.learning_progress.CopyFrom(slices.learning_progress(record))
    if purpose.declares(Slice.COMPETENCY_PROFILE) and "competency" in models:
        bundle.competency_profile.CopyFrom(slices.competency_profile(models["competency"]))
    if purpose.declares(Slice.READINESS) and "readiness" in models:
        bundle.readiness.CopyFrom(slices.readiness(models["readiness"]))
    if purpose.declares(Slice.CURRENT_PLAN) and "current_plan" in models:
        bundle.current_plan.CopyFrom(slices.learning_plan(models["current_plan"]))
    if purpose.declares(Slice.NEXT_EXPERIENCE) and "next_experience" in models:
        recommended = slices.next_experience(models["next_experience"])
        # A recommendation travels with its reason or not at all: nobody can explain it.
        if recommended.reason:
            bundle.next_experience.CopyFrom(recommended)
    return bundle
