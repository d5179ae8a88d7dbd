"""Each data slice of a bundle, read from the repository's rows and the engines' models.

Rows and computed models arrive as JSON-like values. They are read defensively: a value of the
wrong type is treated as missing, never coerced to 0, and a missing value leaves its field unset.
Computed models are copied as the engines wrote them; the only thing derived here is the
knowledge state of a node (or strand) from its mastery and confidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any, Final, TypeAlias

from google.protobuf.timestamp_pb2 import Timestamp

from nemo_context.repository import JsonObject, LearnerRecord
from nemo_protos.context.v1 import learner_context_pb2 as pb

# Knowledge-state thresholds. A copy of the learning engine's rule: change both together.
UNKNOWN_BELOW_CONFIDENCE: Final = 0.25
SOLID_FROM_MASTERY: Final = 0.8
SHAKY_FROM_MASTERY: Final = 0.5

State: TypeAlias = pb.KnowledgeState.ValueType


def knowledge_state(mastery: float | None, confidence: float | None) -> State:
    """unknown when confidence < 0.25 (checked first), else solid ≥ 0.8, shaky ≥ 0.5, else gap."""
    if confidence is None or confidence < UNKNOWN_BELOW_CONFIDENCE or mastery is None:
        return pb.KNOWLEDGE_STATE_UNKNOWN
    if mastery >= SOLID_FROM_MASTERY:
        return pb.KNOWLEDGE_STATE_SOLID
    if mastery >= SHAKY_FROM_MASTERY:
        return pb.KNOWLEDGE_STATE_SHAKY
    return pb.KNOWLEDGE_STATE_GAP


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _list(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list) else ()


def timestamp(moment: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(moment.astimezone(UTC))
    return stamp


def _parse_timestamp(value: Any) -> Timestamp | None:
    if not isinstance(value, str):
        return None
    instant = _parse_instant(value)
    return None if instant is None else Timestamp(seconds=instant[0], nanos=instant[1])


@lru_cache(maxsize=4096)
def _parse_instant(value: str) -> tuple[int, int] | None:
    """(seconds, nanos) of an ISO date or date-time; cached because every build of a learner
    reads the same few instants (evidence times, due dates)."""
    try:
        if len(value) == 10:  # a date: midnight UTC
            stamp = timestamp(datetime.combine(date.fromisoformat(value), datetime.min.time(), UTC))
        else:
            stamp = timestamp(datetime.fromisoformat(value))
    except ValueError:
        return None
    return stamp.seconds, stamp.nanos


def _provenance(model_row: JsonObject) -> pb.ModelProvenance:
    return pb.ModelProvenance(
        version=_int(model_row.get("version")) or 0,
        compute_time=_parse_timestamp(model_row.get("computed_at")),
        engine_version=_text(model_row.get("engine_version")),
    )


def _node_refs(node_ids: Any, titles: Mapping[str, str]) -> list[pb.NodeRef]:
    return [
        pb.NodeRef(node_id=node_id, node_title=titles.get(node_id, ""))
        for node_id in _list(node_ids)
        if isinstance(node_id, str)
    ]


def mastery_entry(row: JsonObject) -> pb.MasteryEntry:
    mastery, confidence = _float(row.get("mastery")), _float(row.get("confidence"))
    return pb.MasteryEntry(
        node_id=_text(row.get("node_id")),
        node_title=_text(row.get("node_title")),
        mastery=mastery,
        confidence=confidence,
        coverage=_float(row.get("coverage")),
        evidence_count=_int(row.get("evidence_count")) or 0,
        state=knowledge_state(mastery, confidence),
    )


def evidence_summary(rows: Sequence[JsonObject]) -> pb.EvidenceSummary:
    items = [
        pb.EvidenceEntry(
            node_id=_text(row.get("node_id")),
            correct=row.get("correct") is True,
            reliability=_float(row.get("reliability")),
            observe_time=_parse_timestamp(row.get("observed_at")),
        )
        for row in rows
    ]
    correct = sum(1 for item in items if item.correct)
    return pb.EvidenceSummary(
        items=items, correct_count=correct, incorrect_count=len(items) - correct
    )


def goal(row: JsonObject) -> pb.Goal:
    return pb.Goal(
        title=_text(row.get("title")),
        target=_text(row.get("target")),
        due_time=_parse_timestamp(row.get("due_on")),
    )


def retention_entry(row: JsonObject) -> pb.RetentionEntry:
    return pb.RetentionEntry(
        node_id=_text(row.get("node_id")),
        node_title=_text(row.get("node_title")),
        due_time=_parse_timestamp(row.get("due_at")),
        strength=_float(row.get("strength")),
    )


def learning_context(model_row: JsonObject) -> pb.LearningContext:
    model, titles = model_row.get("model") or {}, model_row.get("node_titles") or {}
    return pb.LearningContext(
        subject=_text(model.get("current_subject")),
        strand=_text(model.get("current_strand")),
        package_title=_text(model.get("current_package")),
        focus_nodes=_node_refs(model.get("focus_node_ids"), titles),
        study_days_per_week=_int(model.get("study_days_per_week")),
        provenance=_provenance(model_row),
    )


def learning_progress(record: LearnerRecord) -> pb.LearningProgress:
    states = [knowledge_state(_float(m), _float(c)) for m, c in record.node_measures]
    activity = record.evidence_activity or {}
    progress = pb.LearningProgress(
        solid_count=states.count(pb.KNOWLEDGE_STATE_SOLID),
        shaky_count=states.count(pb.KNOWLEDGE_STATE_SHAKY),
        gap_count=states.count(pb.KNOWLEDGE_STATE_GAP),
        unknown_count=states.count(pb.KNOWLEDGE_STATE_UNKNOWN),
        evidence_last_7_days=_int(activity.get("last_7_days")) or 0,
        last_activity_time=_parse_timestamp(activity.get("last_activity_at")),
    )
    model_row = record.models.get("progress")
    if model_row is None:
        return progress
    model, titles = model_row.get("model") or {}, model_row.get("node_titles") or {}
    progress.MergeFrom(
        pb.LearningProgress(
            coverage=_float(model.get("coverage")),
            provenance=_provenance(model_row),
            period=_text(model.get("period")),
            sessions=_int(model.get("sessions")),
            minutes=_int(model.get("minutes")),
            items_attempted=_int(model.get("items_attempted")),
            items_correct=_int(model.get("items_correct")),
            streak_days=_int(model.get("streak_days")),
            improved_nodes=_node_refs(model.get("nodes_improved"), titles),
            declined_nodes=_node_refs(model.get("nodes_declined"), titles),
        )
    )
    return progress


def competency_profile(model_row: JsonObject) -> pb.CompetencyProfile:
    model = model_row.get("model") or {}
    competencies = [
        pb.Competency(
            code=_text(item.get("code")),
            title=_text(item.get("title")),
            level=_int(item.get("level")),
            max_level=_int(item.get("max_level")),
            evidence_count=_int(item.get("evidence_count")),
            confidence=_float(item.get("confidence")),
        )
        for item in _list(model.get("competencies"))
        if isinstance(item, dict)
    ]
    strands = [
        pb.CompetencyEntry(
            strand=_text(item.get("strand")),
            mastery=_float(item.get("mastery")),
            coverage=_float(item.get("coverage")),
            confidence=_float(item.get("confidence")),
            state=knowledge_state(_float(item.get("mastery")), _float(item.get("confidence"))),
        )
        for item in _list(model.get("strands"))
        if isinstance(item, dict)
    ]
    return pb.CompetencyProfile(
        strands=strands, competencies=competencies, provenance=_provenance(model_row)
    )


def readiness(model_row: JsonObject) -> pb.Readiness:
    model, titles = model_row.get("model") or {}, model_row.get("node_titles") or {}
    blocking = _node_refs(model.get("blocking_node_ids"), titles)
    return pb.Readiness(
        readiness=_float(model.get("readiness")),
        band=_text(model.get("band")),
        milestone=_text(model.get("target")),
        blocking_node_ids=[node.node_id for node in blocking],
        blocking_nodes=blocking,
        confidence=_float(model.get("confidence")),
        coverage=_float(model.get("coverage")),
        strands=[
            pb.StrandReadiness(
                strand=_text(item.get("strand")), readiness=_float(item.get("readiness"))
            )
            for item in _list(model.get("by_strand"))
            if isinstance(item, dict)
        ],
        provenance=_provenance(model_row),
    )


def learning_plan(model_row: JsonObject) -> pb.LearningPlan:
    model, titles = model_row.get("model") or {}, model_row.get("node_titles") or {}
    steps = [
        pb.PlanStep(
            position=_int(step.get("order")) or 0,
            node_id=_text(step.get("node_id")),
            node_title=titles.get(_text(step.get("node_id")), ""),
            activity=_text(step.get("activity")),
            status=_text(step.get("status")),
            minutes=_int(step.get("minutes")),
        )
        for step in _list(model.get("steps"))
        if isinstance(step, dict)
    ]
    return pb.LearningPlan(
        plan_id=_text(model.get("plan_id")),
        title=_text(model.get("title")),
        steps=steps,
        horizon_days=_int(model.get("horizon_days")),
        provenance=_provenance(model_row),
    )


def next_experience(model_row: JsonObject) -> pb.NextExperience:
    model, titles = model_row.get("model") or {}, model_row.get("node_titles") or {}
    node_id = _text(model.get("node_id"))
    return pb.NextExperience(
        kind=_text(model.get("experience_type")),
        node_id=node_id,
        node_title=titles.get(node_id, ""),
        reason=_text(model.get("reason")),
        title=_text(model.get("title")),
        estimated_minutes=_int(model.get("estimated_minutes")),
        provenance=_provenance(model_row),
    )
