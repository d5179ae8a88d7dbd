"""Measures of learning: mastery, evidence, goals, retention and the engines' learner models.

L-2041-1 has 15 mastery rows spanning solid (>= 0.8), shaky (>= 0.5), gap and unknown (confidence
< 0.25), so mastery limits of 5, 8 and 12 all cut. Its 10 most recent evidence items are 6
correct and 4 incorrect. L-2041-2 has measures but no computed models (missing stays missing);
L-2041-10 has nothing measured yet.
"""

from __future__ import annotations

from datetime import date

from nemo_ops.seed_data.base import TableData, at

# The tables below are laid out as tables; the formatter would put every field on its own line.
# fmt: off

# (learner_id, node_id, mastery, confidence, coverage, evidence_count, days since update)
_MASTERY: tuple[tuple[str, str, float, float, float | None, int, int], ...] = (
    ("L-2041-1", "math-08-algebraic-identities",      0.35, 0.70, 0.80, 14,  1),
    ("L-2041-1", "math-08-slope",                     0.42, 0.60, 0.50,  9,  2),
    ("L-2041-1", "math-08-factorization",             0.48, 0.55, 0.60,  8,  3),
    ("L-2041-1", "math-08-similar-triangles",         0.52, 0.35, 0.40,  4, 12),
    ("L-2041-1", "math-08-rational-expressions",      0.55, 0.40, 0.30,  5,  9),
    ("L-2041-1", "math-08-linear-functions",          0.62, 0.50, 0.70,  7,  6),
    ("L-2041-1", "math-08-experimental-probability",  0.67, 0.30, None,  3, 20),
    ("L-2041-1", "math-08-pythagorean-theorem",       0.74, 0.45, 0.90,  6,  4),
    ("L-2041-1", "science-08-density",                0.58, 0.50, 0.60,  5, 15),
    ("L-2041-1", "math-08-quadrilaterals",            0.83, 0.70, 1.00, 11, 30),
    ("L-2041-1", "math-08-polynomial-multiplication", 0.86, 0.80, 1.00, 16,  5),
    ("L-2041-1", "math-08-data-charts",               0.88, 0.90, 1.00, 12, 40),
    ("L-2041-1", "math-08-linear-equations",          0.91, 0.85, 1.00, 18,  8),
    ("L-2041-1", "math-08-thales-theorem",            0.30, 0.15, 0.20,  1, 25),  # unknown
    ("L-2041-1", "math-09-quadratic-equations",       0.12, 0.20, None,  1,  2),  # unknown
    ("L-2041-2", "math-06-gcd",                       0.72, 0.60, 0.80,  6,  5),
    ("L-2041-2", "math-06-integers",                  0.44, 0.50, 0.70,  7,  3),
    ("L-2041-2", "math-05-fractions",                 0.90, 0.80, 1.00, 10, 60),
    ("L-2041-3", "math-05-fractions",                 0.81, 0.75, 1.00, 12,  3),
    ("L-2041-3", "math-05-decimals",                  0.57, 0.60, 0.80,  8,  2),
    ("L-2041-3", "math-05-percentages",               0.38, 0.45, 0.50,  5,  1),
    ("L-2041-3", "math-05-triangle-area",             0.66, 0.20, 0.30,  2, 14),  # unknown
    ("L-2041-3", "vietnamese-05-synonyms",            0.93, 0.85, 1.00,  9, 21),
)

# (id, learner_id, node_id, item_id, correct, reliability, hours ago, verbatim payload)
_EVIDENCE: tuple[tuple[str, str, str, str | None, bool, float, float, dict[str, str]], ...] = (
    # L-2041-1, most recent first: the latest ten are 6 correct and 4 incorrect.
    ("E-1001", "L-2041-1", "math-08-algebraic-identities", "I-ID-02", False, 0.9, 2,
     {"answer": "4x² - 1, em bình phương từng số hạng rồi trừ đi ạ",
      "self_confidence": "chắc chắn",
      "reasoning": "em nhớ cô dạy bình phương thì bình phương hết"}),
    ("E-1002", "L-2041-1", "math-08-algebraic-identities", "I-ID-01", True, 0.95, 3,
     {"answer": "x² + 6x + 9", "self_confidence": "khá chắc",
      "reasoning": "a² + 2ab + b² với a = x, b = 3"}),
    ("E-1003", "L-2041-1", "math-08-slope", "I-SL-01", False, 0.85, 20,
     {"answer": "5 ạ, vì số đứng một mình là hệ số góc", "self_confidence": "không chắc"}),
    ("E-1004", "L-2041-1", "math-08-slope", "I-SL-02", True, 0.7, 21,
     {"answer": "song song vì cùng là 3x, con đường thẳng thứ hai thấp hơn",
      "self_confidence": "chắc chắn"}),
    ("E-1005", "L-2041-1", "math-08-factorization", "I-FA-01", True, 0.9, 45,
     {"answer": "(x-3)(x+3) dùng hiệu hai bình phương", "self_confidence": "chắc chắn"}),
    ("E-1006", "L-2041-1", "math-08-factorization", "I-FA-02", False, 0.8, 46,
     {"answer": "3(x² + 2x), em quên mất x cũng là nhân tử chung",
      "self_confidence": "hơi chắc"}),
    ("E-1007", "L-2041-1", "math-08-linear-equations", "I-LE-01", True, 0.95, 70,
     {"answer": "3x = 18 nên x = 6", "self_confidence": "chắc chắn"}),
    ("E-1008", "L-2041-1", "math-08-pythagorean-theorem", "I-PY-01", True, 0.9, 72,
     {"answer": "căn của 36 + 64 = căn 100 = 10cm", "self_confidence": "chắc chắn"}),
    ("E-1009", "L-2041-1", "math-08-thales-theorem", "I-TH-01", False, 0.6, 96,
     {"answer": "EC = 5 vì em đoán tỉ lệ cộng thêm 1", "self_confidence": "đoán bừa"}),
    ("E-1010", "L-2041-1", "math-08-algebraic-identities", "I-ID-03", True, 0.9, 100,
     {"answer": "B", "self_confidence": "chắc chắn"}),
    # Older than the ten most recent.
    ("E-1011", "L-2041-1", "math-08-algebraic-identities", "I-ID-04", False, 0.75, 150,
     {"answer": "101² = 10001 em nhân nhẩm 101 nhân 101", "self_confidence": "khá chắc"}),
    ("E-1012", "L-2041-1", "math-08-experimental-probability", "I-PR-01", True, 0.8, 200,
     {"answer": "9 trên 50 tức là 0,18", "self_confidence": "chắc chắn"}),
    ("E-1013", "L-2041-1", "math-09-quadratic-equations", "I-QE-01", False, 0.5, 210,
     {"answer": "x = 6 vì 5 + 1 = 6", "self_confidence": "không biết làm"}),
    ("E-1014", "L-2041-1", "math-08-polynomial-multiplication", None, True, 0.85, 300,
     {"answer": "(x + 2)(x + 5) = x² + 7x + 10", "self_confidence": "chắc chắn"}),
    # Other learners.
    ("E-2001", "L-2041-2", "math-06-integers", None, False, 0.8, 30,
     {"answer": "(-3) nhân (-4) bằng -12 ạ", "self_confidence": "chắc chắn"}),
    ("E-2002", "L-2041-2", "math-05-fractions", "I-FR-01", True, 0.9, 400,
     {"answer": "3/6 + 2/6 = 5/6", "self_confidence": "chắc chắn"}),
    ("E-3001", "L-2041-3", "math-05-decimals", "I-DC-01", True, 0.9, 10,
     {"answer": "3,5 vì chữ số 7 lớn hơn 5 nên làm tròn lên", "self_confidence": "chắc chắn"}),
    ("E-3002", "L-2041-3", "math-05-percentages", "I-PC-01", False, 0.85, 12,
     {"answer": "12 phần trăm ạ", "self_confidence": "hơi chắc"}),
    ("E-3003", "L-2041-3", "math-05-fractions", "I-FR-01", True, 0.9, 50,
     {"answer": "5/6, con quy đồng mẫu là 6", "self_confidence": "chắc chắn"}),
)

# (learner_id, node_id, due in days (negative: overdue), interval_days, strength,
#  days since last review)
_RETENTION: tuple[tuple[str, str, float, int, float, float], ...] = (
    ("L-2041-1", "math-08-algebraic-identities",      -1,   2, 0.35,  3),
    ("L-2041-1", "math-08-pythagorean-theorem",        1,   6, 0.60,  5),
    ("L-2041-1", "math-08-polynomial-multiplication",  4,  14, 0.80, 10),
    ("L-2041-1", "math-08-linear-equations",          12,  30, 0.90, 18),
    ("L-2041-3", "math-05-fractions",                  2,  10, 0.75,  8),
    ("L-2041-3", "math-05-percentages",                0.5, 1, 0.30,  0.5),
)

# fmt: on

MASTERY = TableData(
    "learning.mastery",
    ("learner_id", "node_id"),
    tuple(
        {
            "learner_id": learner_id,
            "node_id": node_id,
            "mastery": mastery,
            "confidence": confidence,
            "coverage": coverage,
            "evidence_count": evidence_count,
            "updated_at": at(days=-days_ago),
        }
        for (
            learner_id,
            node_id,
            mastery,
            confidence,
            coverage,
            evidence_count,
            days_ago,
        ) in _MASTERY
    ),
)

EVIDENCE = TableData(
    "learning.evidence",
    ("id",),
    tuple(
        {
            "id": evidence_id,
            "learner_id": learner_id,
            "node_id": node_id,
            "item_id": item_id,
            "correct": correct,
            "reliability": reliability,
            "payload_json": payload,
            "created_at": at(hours=-hours_ago),
        }
        for (
            evidence_id,
            learner_id,
            node_id,
            item_id,
            correct,
            reliability,
            hours_ago,
            payload,
        ) in _EVIDENCE
    ),
)

GOALS = TableData(
    "learning.goals",
    ("id",),
    (
        {
            "id": "G-1",
            "learner_id": "L-2041-1",
            "title": "Thi vào lớp 10 — Toán điều kiện",
            "target": "Đạt từ 8,0 điểm môn Toán trong kỳ thi tuyển sinh lớp 10",
            "due_on": date(2028, 6, 1),
            "status": "active",
            "created_at": at(days=-60),
        },
        {
            "id": "G-2",
            "learner_id": "L-2041-1",
            "title": "Nắm chắc bảy hằng đẳng thức đáng nhớ",
            "target": "Mức thành thạo Hằng đẳng thức từ 0,8 trở lên",
            "due_on": date(2026, 12, 20),
            "status": "active",
            "created_at": at(days=-14),
        },
        {
            "id": "G-3",
            "learner_id": "L-2041-3",
            "title": "Hoàn thành chương Số thập phân",
            "target": "Làm đúng 9/10 bài kiểm tra cuối chương",
            "due_on": date(2026, 12, 31),
            "status": "active",
            "created_at": at(days=-20),
        },
    ),
)

RETENTION = TableData(
    "learning.retention",
    ("learner_id", "node_id"),
    tuple(
        {
            "learner_id": learner_id,
            "node_id": node_id,
            "due_at": at(days=due_in),
            "interval_days": interval,
            "strength": strength,
            "last_reviewed_at": at(days=-reviewed_ago),
        }
        for learner_id, node_id, due_in, interval, strength, reviewed_ago in _RETENTION
    ),
)


def _model(
    learner_id: str, kind: str, version: int, days_ago: float, model: dict[str, object]
) -> dict[str, object]:
    return {
        "learner_id": learner_id,
        "kind": kind,
        "version": version,
        "model_json": model,
        "engine_version": f"{kind}-engine 2.3.0",
        "computed_at": at(days=-days_ago),
    }


LEARNER_MODEL_VERSIONS = TableData(
    "learning.learner_model_versions",
    ("learner_id", "kind", "version"),
    (
        _model(
            "L-2041-1",
            "context",
            1,
            1,
            {
                "current_subject": "math",
                "current_strand": "algebra",
                "current_package": "Toán 8 — Đại số học kỳ I",
                "focus_node_ids": ["math-08-algebraic-identities", "math-08-factorization"],
                "active_goal_id": "G-2",
                "study_days_per_week": 4,
            },
        ),
        # An older readiness version: readers must take the latest one.
        _model(
            "L-2041-1",
            "readiness",
            1,
            15,
            {
                "target": "Thi vào lớp 10 — Toán",
                "readiness": 0.49,
                "confidence": 0.50,
                "coverage": 0.62,
                "by_strand": [
                    {"strand": "algebra", "readiness": 0.44},
                    {"strand": "geometry", "readiness": 0.55},
                ],
                "blocking_node_ids": ["math-08-algebraic-identities", "math-08-slope"],
            },
        ),
        _model(
            "L-2041-1",
            "readiness",
            2,
            1,
            {
                "target": "Thi vào lớp 10 — Toán",
                "readiness": 0.58,
                "confidence": 0.62,
                "coverage": 0.71,
                "by_strand": [
                    {"strand": "algebra", "readiness": 0.52},
                    {"strand": "functions", "readiness": 0.55},
                    {"strand": "geometry", "readiness": 0.63},
                    {"strand": "statistics_probability", "readiness": 0.74},
                ],
                "blocking_node_ids": ["math-08-algebraic-identities", "math-08-slope"],
            },
        ),
        _model(
            "L-2041-1",
            "current_plan",
            1,
            1,
            {
                "plan_id": "PLAN-2026-11-A",
                "title": "Củng cố hằng đẳng thức trước khi học phân tích nhân tử",
                "horizon_days": 14,
                "steps": [
                    {
                        "order": 1,
                        "node_id": "math-08-polynomial-multiplication",
                        "activity": "review",
                        "minutes": 15,
                        "status": "done",
                    },
                    {
                        "order": 2,
                        "node_id": "math-08-algebraic-identities",
                        "activity": "guided_practice",
                        "minutes": 25,
                        "status": "in_progress",
                    },
                    {
                        "order": 3,
                        "node_id": "math-08-factorization",
                        "activity": "practice",
                        "minutes": 25,
                        "status": "planned",
                    },
                    {
                        "order": 4,
                        "node_id": "math-08-slope",
                        "activity": "lesson",
                        "minutes": 20,
                        "status": "planned",
                    },
                ],
            },
        ),
        _model(
            "L-2041-1",
            "next_experience",
            1,
            1,
            {
                "node_id": "math-08-algebraic-identities",
                "experience_type": "guided_practice",
                "title": "Luyện khai triển bình phương của một hiệu",
                "estimated_minutes": 20,
                "reason": (
                    "Hai lần sai gần nhất đều bỏ sót hạng tử 2ab; phân tích đa thức thành nhân tử "
                    "ở bước sau của kế hoạch cần nền này."
                ),
            },
        ),
        _model(
            "L-2041-1",
            "competency",
            1,
            3,
            {
                "competencies": [
                    {
                        "code": "math.reasoning",
                        "title": "Tư duy và lập luận toán học",
                        "level": 2,
                        "max_level": 4,
                        "evidence_count": 21,
                        "confidence": 0.6,
                    },
                    {
                        "code": "math.modelling",
                        "title": "Mô hình hóa toán học",
                        "level": 2,
                        "max_level": 4,
                        "evidence_count": 9,
                        "confidence": 0.45,
                    },
                    {
                        "code": "math.problem_solving",
                        "title": "Giải quyết vấn đề toán học",
                        "level": 3,
                        "max_level": 4,
                        "evidence_count": 17,
                        "confidence": 0.55,
                    },
                    {
                        "code": "math.communication",
                        "title": "Giao tiếp toán học",
                        "level": 1,
                        "max_level": 4,
                        "evidence_count": 4,
                        "confidence": 0.2,
                    },
                ],
            },
        ),
        _model(
            "L-2041-1",
            "progress",
            1,
            1,
            {
                "period": "2026-W47",
                "sessions": 5,
                "minutes": 140,
                "items_attempted": 38,
                "items_correct": 24,
                "streak_days": 4,
                "nodes_improved": ["math-08-polynomial-multiplication", "math-08-linear-equations"],
                "nodes_declined": ["math-08-slope"],
            },
        ),
        _model(
            "L-2041-3",
            "context",
            1,
            2,
            {
                "current_subject": "math",
                "current_strand": "numbers",
                "current_package": "Toán 5 — Số thập phân",
                "focus_node_ids": ["math-05-decimals", "math-05-percentages"],
                "active_goal_id": "G-3",
                "study_days_per_week": 3,
            },
        ),
        _model(
            "L-2041-3",
            "readiness",
            1,
            2,
            {
                "target": "Kiểm tra cuối học kỳ I — Toán 5",
                "readiness": 0.64,
                "confidence": 0.55,
                "coverage": 0.78,
                "by_strand": [
                    {"strand": "numbers", "readiness": 0.61},
                    {"strand": "geometry", "readiness": 0.7},
                ],
                "blocking_node_ids": ["math-05-percentages"],
            },
        ),
        _model(
            "L-2041-3",
            "current_plan",
            1,
            2,
            {
                "plan_id": "PLAN-2026-11-B",
                "title": "Số thập phân và tỉ số phần trăm",
                "horizon_days": 10,
                "steps": [
                    {
                        "order": 1,
                        "node_id": "math-05-decimals",
                        "activity": "practice",
                        "minutes": 15,
                        "status": "in_progress",
                    },
                    {
                        "order": 2,
                        "node_id": "math-05-percentages",
                        "activity": "lesson",
                        "minutes": 20,
                        "status": "planned",
                    },
                ],
            },
        ),
        _model(
            "L-2041-3",
            "next_experience",
            1,
            2,
            {
                "node_id": "math-05-percentages",
                "experience_type": "lesson",
                "title": "Tỉ số phần trăm qua ví dụ mua sắm",
                "estimated_minutes": 15,
                "reason": (
                    "Số thập phân đã gần vững; tỉ số phần trăm là chỗ hổng chặn bài kiểm tra "
                    "cuối kỳ."
                ),
            },
        ),
        _model(
            "L-2041-3",
            "competency",
            1,
            4,
            {
                "competencies": [
                    {
                        "code": "math.reasoning",
                        "title": "Tư duy và lập luận toán học",
                        "level": 2,
                        "max_level": 4,
                        "evidence_count": 11,
                        "confidence": 0.5,
                    },
                    {
                        "code": "math.problem_solving",
                        "title": "Giải quyết vấn đề toán học",
                        "level": 2,
                        "max_level": 4,
                        "evidence_count": 8,
                        "confidence": 0.4,
                    },
                ],
            },
        ),
        _model(
            "L-2041-3",
            "progress",
            1,
            2,
            {
                "period": "2026-W47",
                "sessions": 3,
                "minutes": 75,
                "items_attempted": 22,
                "items_correct": 15,
                "streak_days": 2,
                "nodes_improved": ["math-05-decimals"],
                "nodes_declined": [],
            },
        ),
    ),
)

TABLES = (MASTERY, EVIDENCE, GOALS, RETENTION, LEARNER_MODEL_VERSIONS)
