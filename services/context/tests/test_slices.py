"""Slices from rows and computed models: the knowledge-state rule, defensive reading of JSON."""

from __future__ import annotations

import pytest

from nemo_context import slices
from nemo_context.slices import knowledge_state
from nemo_protos.context.v1 import learner_context_pb2 as pb


@pytest.mark.parametrize(
    ("mastery", "confidence", "state"),
    [
        (0.95, 0.10, pb.KNOWLEDGE_STATE_UNKNOWN),  # confidence is checked first
        (0.95, None, pb.KNOWLEDGE_STATE_UNKNOWN),
        (None, 0.90, pb.KNOWLEDGE_STATE_UNKNOWN),
        (0.30, 0.2499, pb.KNOWLEDGE_STATE_UNKNOWN),
        (0.30, 0.25, pb.KNOWLEDGE_STATE_GAP),
        (0.4999, 0.9, pb.KNOWLEDGE_STATE_GAP),
        (0.50, 0.9, pb.KNOWLEDGE_STATE_SHAKY),
        (0.7999, 0.9, pb.KNOWLEDGE_STATE_SHAKY),
        (0.80, 0.9, pb.KNOWLEDGE_STATE_SOLID),
        (0.0, 0.9, pb.KNOWLEDGE_STATE_GAP),
    ],
)
def test_knowledge_state_thresholds(
    mastery: float | None, confidence: float | None, state: int
) -> None:
    assert knowledge_state(mastery, confidence) == state


def test_engine_json_of_the_wrong_type_reads_as_missing_not_zero() -> None:
    model_row = {
        "version": 3,
        "engine_version": "readiness-engine 9",
        "computed_at": "not a time",
        "model": {"readiness": "high", "confidence": True, "coverage": 0.4, "by_strand": "x"},
        "node_titles": {},
    }
    readiness = slices.readiness(model_row)
    assert not readiness.HasField("readiness")
    assert not readiness.HasField("confidence")  # a boolean is not a number
    assert readiness.coverage == 0.4
    assert not readiness.strands
    assert not readiness.provenance.HasField("compute_time")
    assert readiness.provenance.engine_version == "readiness-engine 9"


def test_plan_steps_keep_the_engine_order_and_take_titles_from_the_nodes() -> None:
    plan = slices.learning_plan(
        {
            "version": 1,
            "model": {
                "plan_id": "P",
                "steps": [
                    {"order": 2, "node_id": "n-b", "activity": "practice", "status": "planned"},
                    {"order": 1, "node_id": "n-a", "activity": "review", "minutes": 10},
                ],
            },
            "node_titles": {"n-a": "Phân số", "n-b": "Số thập phân"},
        }
    )
    assert [(s.position, s.node_title) for s in plan.steps] == [(2, "Số thập phân"), (1, "Phân số")]
    assert plan.steps[1].minutes == 10
    assert not plan.steps[0].HasField("minutes")
    assert not plan.HasField("horizon_days")


def test_a_goal_date_is_midnight_utc() -> None:
    goal = slices.goal({"title": "Thi", "target": None, "due_on": "2028-06-01"})
    assert goal.due_time.ToJsonString() == "2028-06-01T00:00:00Z"
    assert goal.target == ""
    assert isinstance(goal, pb.Goal)


def test_a_competency_without_an_evidence_count_leaves_it_missing() -> None:
    profile = slices.competency_profile(
        {
            "model": {
                "competencies": [{"code": "math.reasoning", "evidence_count": 4}, {"code": "x"}]
            }
        }
    )
    counted, uncounted = profile.competencies
    assert counted.evidence_count == 4
    assert not uncounted.HasField("evidence_count")
