"""The one renderer: Vietnamese by default, English on request, never a raw id."""

from __future__ import annotations

import re

import pytest

from nemo_context.builder import ContextBuilder
from nemo_context.pseudonym import Pseudonymizer
from nemo_context.purposes import CONVERSATION, PURPOSES
from nemo_context.render import render_bundle
from nemo_context.repository import PostgresLearnerRepository
from nemo_core.db import Pool
from nemo_protos.context.v1 import learner_context_pb2 as pb
from nemo_protos.type.v1 import locale_pb2

from .conftest import TEST_IDENTIFIER_KEY, TEST_PSEUDONYM_KEY

BUNDLE_PURPOSES = [name for name, purpose in PURPOSES.items() if purpose.kind != CONVERSATION]
LINKED_TO_L1 = (
    "L-2041-1",
    "F-2041-1",
    "U-2041-L1",
    "U-2041-P1",
    "U-2041-P4",
    "U-2041-G1",
    "U-2041-G3",
    "U-2041-M1",
)
LOCALES = [locale_pb2.LOCALE_UNSPECIFIED, locale_pb2.LOCALE_VI, locale_pb2.LOCALE_EN]


@pytest.fixture
def builder(context_pool: Pool) -> ContextBuilder:
    return ContextBuilder(
        PostgresLearnerRepository(context_pool, identifier_key=TEST_IDENTIFIER_KEY),
        Pseudonymizer(TEST_PSEUDONYM_KEY.encode()),
    )


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("purpose", BUNDLE_PURPOSES)
async def test_rendered_text_never_prints_a_raw_id_or_a_node_id(
    builder: ContextBuilder, purpose: str, locale: locale_pb2.Locale.ValueType
) -> None:
    bundle = (await builder.build("L-2041-1", PURPOSES[purpose], locale)).message
    assert bundle.rendered_text
    for raw in LINKED_TO_L1:
        assert not re.search(rf"(?<![^\W_]){re.escape(raw)}(?![^\W_])", bundle.rendered_text, re.I)
    assert "math-0" not in bundle.rendered_text
    assert bundle.learner_ref in bundle.rendered_text or "profile" not in bundle.slices


async def test_vietnamese_is_the_default_and_reads_like_the_reference(
    builder: ContextBuilder,
) -> None:
    bundle = (
        await builder.build("L-2041-1", PURPOSES["tutor_hint"], locale_pb2.LOCALE_UNSPECIFIED)
    ).message
    assert bundle.locale == locale_pb2.LOCALE_VI
    lines = bundle.rendered_text.splitlines()
    assert lines[0] == f"Học sinh {bundle.learner_ref}, lớp 8."
    assert lines[1].startswith("Đang yếu nhất: Phương trình bậc hai (12%, chưa đủ dữ liệu)")
    assert "Hằng đẳng thức (35%, lỗ hổng)" in lines[1]
    assert lines[2] == "10 lần trả lời gần nhất: đúng 6, sai 4."


async def test_english_on_request(builder: ContextBuilder) -> None:
    bundle = (
        await builder.build("L-2041-1", PURPOSES["portrait_summary"], locale_pb2.LOCALE_EN)
    ).message
    assert bundle.locale == locale_pb2.LOCALE_EN
    text = bundle.rendered_text
    assert text.startswith(f"Learner {bundle.learner_ref}, grade 8.")
    assert "Goal: Nắm chắc bảy hằng đẳng thức đáng nhớ" in text
    assert "Due for review: Hằng đẳng thức (due 2026-11-22)" in text
    assert "lớp" not in text


@pytest.mark.parametrize(
    ("locale", "unknown", "no_readiness", "sessions"),
    [
        (locale_pb2.LOCALE_VI, "chưa có số liệu", "“Cuối kỳ”: chưa rõ.", "buổi học"),
        (locale_pb2.LOCALE_EN, "no estimate", "“Cuối kỳ”: unknown.", "sessions"),
    ],
)
def test_missing_values_are_said_to_be_unknown_never_zero(
    locale: locale_pb2.Locale.ValueType, unknown: str, no_readiness: str, sessions: str
) -> None:
    bundle = pb.ContextBundle(
        learner_ref="nemo_0123456789ab",
        locale=locale,
        mastery=[pb.MasteryEntry(node_title="Phân số", state=pb.KNOWLEDGE_STATE_UNKNOWN)],
        readiness=pb.Readiness(milestone="Cuối kỳ"),
        learning_progress=pb.LearningProgress(period="2026-W47"),
    )
    text = render_bundle(bundle)
    assert f"Phân số ({unknown}" in text
    assert no_readiness in text
    assert sessions not in text  # activity the engine did not report is left out
    assert "0%" not in text


@pytest.mark.parametrize(
    ("locale", "printed"),
    [(locale_pb2.LOCALE_VI, "22/11/2026"), (locale_pb2.LOCALE_EN, "2026-11-22")],
)
def test_dates_are_printed_as_learners_in_vietnam_see_them(
    locale: locale_pb2.Locale.ValueType, printed: str
) -> None:
    entry = pb.RetentionEntry(node_id="math-08-identities", node_title="Hằng đẳng thức")
    entry.due_time.FromJsonString("2026-11-21T20:00:00Z")  # 03:00 on the 22nd in Vietnam
    text = render_bundle(pb.ContextBundle(locale=locale, retention=[entry]))
    assert printed in text


def test_missing_engine_values_leave_no_empty_words_or_zero_positions() -> None:
    bundle = pb.ContextBundle(
        locale=locale_pb2.LOCALE_VI,
        learning_context=pb.LearningContext(strand="đại số"),
        current_plan=pb.LearningPlan(
            steps=[pb.PlanStep(node_title="Phân số", activity="ôn tập", status="đang làm")]
        ),
    )
    lines = render_bundle(bundle).splitlines()
    assert lines == ["Đang học: mạch đại số.", "Kế hoạch: Phân số (ôn tập, đang làm)."]


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        (
            locale_pb2.LOCALE_VI,
            [
                "Đang học: môn Toán, mạch Thống kê và xác suất.",
                "Kế hoạch: Phân số (luyện tập có hướng dẫn, đang học); "
                "Số thập phân (project work, chưa bắt đầu).",
            ],
        ),
        (
            locale_pb2.LOCALE_EN,
            [
                "Studying: mathematics, strand statistics and probability.",
                "Plan: Phân số (guided practice, in progress); "
                "Số thập phân (project work, planned).",
            ],
        ),
    ],
)
def test_engine_codes_are_printed_as_words(
    locale: locale_pb2.Locale.ValueType, expected: list[str]
) -> None:
    bundle = pb.ContextBundle(
        locale=locale,
        learning_context=pb.LearningContext(subject="math", strand="statistics_probability"),
        current_plan=pb.LearningPlan(
            steps=[
                pb.PlanStep(node_title="Phân số", activity="guided_practice", status="in_progress"),
                pb.PlanStep(node_title="Số thập phân", activity="project_work", status="planned"),
            ]
        ),
    )
    assert render_bundle(bundle).splitlines() == expected
