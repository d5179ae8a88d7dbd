"""The one renderer: a ContextBundle as prompt text, Vietnamese by default, English on request.

It is the last place where data turns into free text, so it prints only what the bundle holds —
the pseudonym, titles, numbers and the engines' own wording — never an id of a learner or a user
(the bundle has none), and never a knowledge node id (titles are for people). The identifier gate
checks the rendered text together with the bundle. Missing values are left out or said to be
unknown; they are never printed as 0.

What differs between languages is data: one :class:`Wording` table per locale, whose templates
name the values they take (``{grade}``); the code that picks and orders the values is shared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta, timezone
from typing import Final

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from nemo_context.vocabulary import term
from nemo_protos.context.v1 import learner_context_pb2 as pb
from nemo_protos.type.v1 import locale_pb2


@dataclass(frozen=True)
class Wording:
    """Every phrase and template the renderer uses, in one language.

    Templates name the values they take (``{grade}``); ``age``, ``subject``, ``strand``,
    ``package`` and ``milestone`` are the optional parts of ``learner``, ``studying`` and
    ``readiness``, left out with their value.
    """

    locale: locale_pb2.Locale.ValueType
    learner: str
    age: str
    weakest: str
    unknown_mastery: str
    states: Mapping[int, str]
    recent_answers: str
    goal: str
    due: str
    review: str
    studying: str
    subject: str
    strand: str
    package: str
    focus: str
    days_per_week: str
    progress: str
    node_counts: str
    sessions: str
    minutes: str
    items_correct: str
    streak: str
    improved: str
    declined: str
    competencies: str
    level: str
    confidence: str
    coverage: str
    readiness: str
    milestone: str
    blocking: str
    plan: str
    next_experience: str
    because: str
    unknown: str
    date_format: str


VIETNAMESE: Final = Wording(
    locale=locale_pb2.LOCALE_VI,
    learner="Học sinh {ref}, lớp {grade}{age}.",
    age=", {age} tuổi",
    weakest="Đang yếu nhất",
    unknown_mastery="chưa có số liệu",
    states={
        pb.KNOWLEDGE_STATE_UNKNOWN: "chưa đủ dữ liệu",
        pb.KNOWLEDGE_STATE_GAP: "lỗ hổng",
        pb.KNOWLEDGE_STATE_SHAKY: "chưa vững",
        pb.KNOWLEDGE_STATE_SOLID: "vững",
    },
    recent_answers="{count} lần trả lời gần nhất: đúng {correct}, sai {incorrect}.",
    goal="Mục tiêu",
    due="hạn",
    review="Cần ôn lại",
    studying="Đang học",
    subject="môn {subject}",
    strand="mạch {strand}",
    package="gói “{package}”",
    focus="trọng tâm",
    days_per_week="{days} ngày học mỗi tuần",
    progress="Tiến độ",
    node_counts="{solid} nút vững, {shaky} chưa vững, {gap} lỗ hổng, {unknown} chưa đủ dữ liệu",
    sessions="{sessions} buổi học",
    minutes="{minutes} phút",
    items_correct="đúng {correct}/{attempted} câu",
    streak="chuỗi {days} ngày liên tiếp",
    improved="tiến bộ",
    declined="đi xuống",
    competencies="Năng lực",
    level="mức",
    confidence="độ tin cậy",
    coverage="độ phủ",
    readiness="Mức sẵn sàng{milestone}",
    milestone=" cho “{milestone}”",
    blocking="đang cản",
    plan="Kế hoạch",
    next_experience="Hoạt động tiếp theo",
    because="lý do",
    unknown="chưa rõ",
    date_format="%d/%m/%Y",
)

ENGLISH: Final = Wording(
    locale=locale_pb2.LOCALE_EN,
    learner="Learner {ref}, grade {grade}{age}.",
    age=", {age} years old",
    weakest="Weakest first",
    unknown_mastery="no estimate",
    states={
        pb.KNOWLEDGE_STATE_UNKNOWN: "too little evidence",
        pb.KNOWLEDGE_STATE_GAP: "gap",
        pb.KNOWLEDGE_STATE_SHAKY: "shaky",
        pb.KNOWLEDGE_STATE_SOLID: "solid",
    },
    recent_answers="Last {count} answers: {correct} correct, {incorrect} incorrect.",
    goal="Goal",
    due="due",
    review="Due for review",
    studying="Studying",
    subject="{subject}",
    strand="strand {strand}",
    package="package “{package}”",
    focus="focus",
    days_per_week="{days} study days a week",
    progress="Progress",
    node_counts=(
        "{solid} nodes solid, {shaky} shaky, {gap} gaps, {unknown} with too little evidence"
    ),
    sessions="{sessions} sessions",
    minutes="{minutes} minutes",
    items_correct="{correct}/{attempted} items correct",
    streak="a {days}-day streak",
    improved="improved",
    declined="declined",
    competencies="Competencies",
    level="level",
    confidence="confidence",
    coverage="coverage",
    readiness="Readiness{milestone}",
    milestone=" for “{milestone}”",
    blocking="held back by",
    plan="Plan",
    next_experience="Next experience",
    because="reason",
    unknown="unknown",
    date_format="%Y-%m-%d",
)

WORDING: Final[Mapping[int, Wording]] = {
    locale_pb2.LOCALE_UNSPECIFIED: VIETNAMESE,
    locale_pb2.LOCALE_VI: VIETNAMESE,
    locale_pb2.LOCALE_EN: ENGLISH,
}

SEPARATOR: Final = ", "

LEARNER_TIME_ZONE: Final = timezone(timedelta(hours=7), "ICT")
"""Dates are printed as the learners see them: in Vietnam, which keeps UTC+7 all year."""


def render_bundle(bundle: pb.ContextBundle) -> str:
    """The bundle as prompt text in ``bundle.locale``; one line per slice the bundle holds."""
    words = WORDING.get(bundle.locale, VIETNAMESE)
    lines: list[str] = []
    if bundle.HasField("profile"):
        profile = bundle.profile
        age = _fill(words.age, age=_optional(profile, "age_years"))
        lines.append(words.learner.format(ref=bundle.learner_ref, grade=profile.grade, age=age))
    if bundle.mastery:
        lines.append(f"{words.weakest}: {_join(_mastery(words, bundle.mastery))}.")
    if bundle.HasField("recent_evidence") and bundle.recent_evidence.items:
        evidence = bundle.recent_evidence
        lines.append(
            words.recent_answers.format(
                count=len(evidence.items),
                correct=evidence.correct_count,
                incorrect=evidence.incorrect_count,
            )
        )
    if bundle.HasField("goal"):
        lines.append(_goal(words, bundle.goal))
    if bundle.retention:
        lines.append(f"{words.review}: {_join(_retention(words, bundle.retention))}.")
    if bundle.HasField("learning_context"):
        lines.append(_learning_context(words, bundle.learning_context))
    if bundle.HasField("learning_progress"):
        lines.append(_progress(words, bundle.learning_progress))
    if bundle.HasField("competency_profile") and bundle.competency_profile.competencies:
        lines.append(_competencies(words, bundle.competency_profile))
    if bundle.HasField("readiness"):
        lines.append(_readiness(words, bundle.readiness))
    if bundle.HasField("current_plan"):
        lines.append(_plan(words, bundle.current_plan))
    if bundle.HasField("next_experience"):
        lines.append(_next(words, bundle.next_experience))
    # A slice whose values are all missing adds no line rather than an empty one.
    return "\n".join(line for line in lines if line)


def _fill(template: str, **values: object) -> str:
    """``template`` filled in; empty when a value is missing (None or an empty string)."""
    if any(value is None or value == "" for value in values.values()):
        return ""
    return template.format(**values)


def _term(words: Wording, code: str) -> str:
    return term(code, words.locale) if code else ""


def _join(parts: Iterable[str]) -> str:
    return SEPARATOR.join(part for part in parts if part)


def _titles(nodes: Iterable[pb.NodeRef]) -> str:
    return _join(node.node_title for node in nodes)


def _percent(value: float) -> str:
    return f"{round(value * 100)}%"


def _date(words: Wording, stamp: Timestamp) -> str:
    return stamp.ToDatetime(tzinfo=LEARNER_TIME_ZONE).strftime(words.date_format)


def _optional(message: Message, field: str) -> int | None:
    value: int = getattr(message, field)
    return value if message.HasField(field) else None


def _mastery(words: Wording, entries: Iterable[pb.MasteryEntry]) -> Iterable[str]:
    for entry in entries:
        value = _percent(entry.mastery) if entry.HasField("mastery") else None
        state = words.states.get(entry.state, "")
        detail = _join((value or words.unknown_mastery, state))
        yield f"{entry.node_title} ({detail})"


def _goal(words: Wording, goal: pb.Goal) -> str:
    text = f"{words.goal}: {goal.title}"
    if goal.target:
        text += f" — {goal.target}"
    if goal.HasField("due_time"):
        text += f" ({words.due} {_date(words, goal.due_time)})"
    return text + "."


def _retention(words: Wording, entries: Iterable[pb.RetentionEntry]) -> Iterable[str]:
    for entry in entries:
        due = f" ({words.due} {_date(words, entry.due_time)})" if entry.HasField("due_time") else ""
        yield f"{entry.node_title}{due}"


def _learning_context(words: Wording, context: pb.LearningContext) -> str:
    studied = _join(
        (
            _fill(words.subject, subject=_term(words, context.subject)),
            _fill(words.strand, strand=_term(words, context.strand)),
            _fill(words.package, package=context.package_title),
        )
    )
    parts = [f"{words.studying}: {studied}"] if studied else []
    if context.focus_nodes:
        parts.append(f"{words.focus}: {_titles(context.focus_nodes)}")
    if context.HasField("study_days_per_week"):
        parts.append(words.days_per_week.format(days=context.study_days_per_week))
    return "; ".join(parts) + "." if parts else ""


def _progress(words: Wording, progress: pb.LearningProgress) -> str:
    head = f"{words.progress} {progress.period}".rstrip()
    activity = (
        _fill(words.sessions, sessions=_optional(progress, "sessions")),
        _fill(words.minutes, minutes=_optional(progress, "minutes")),
        _fill(
            words.items_correct,
            correct=_optional(progress, "items_correct"),
            attempted=_optional(progress, "items_attempted"),
        ),
        _fill(words.streak, days=_optional(progress, "streak_days")),
    )
    parts = [
        _join(activity),
        words.node_counts.format(
            solid=progress.solid_count,
            shaky=progress.shaky_count,
            gap=progress.gap_count,
            unknown=progress.unknown_count,
        ),
    ]
    if progress.improved_nodes:
        parts.append(f"{words.improved}: {_titles(progress.improved_nodes)}")
    if progress.declined_nodes:
        parts.append(f"{words.declined}: {_titles(progress.declined_nodes)}")
    return f"{head}: " + "; ".join(part for part in parts if part) + "."


def _level(words: Wording, competency: pb.Competency) -> str:
    if not competency.HasField("level"):
        return ""
    if not competency.HasField("max_level"):
        return f"{words.level} {competency.level}"
    return f"{words.level} {competency.level}/{competency.max_level}"


def _share(label: str, message: Message, field: str) -> str:
    """``label 42%`` when ``field`` is set, else empty."""
    return f"{label} {_percent(getattr(message, field))}" if message.HasField(field) else ""


def _competencies(words: Wording, profile: pb.CompetencyProfile) -> str:
    items = []
    for competency in profile.competencies:
        detail = _join(
            (_level(words, competency), _share(words.confidence, competency, "confidence"))
        )
        items.append(f"{competency.title} ({detail})" if detail else competency.title)
    return f"{words.competencies}: {_join(items)}."


def _readiness(words: Wording, readiness: pb.Readiness) -> str:
    value = _percent(readiness.readiness) if readiness.HasField("readiness") else words.unknown
    details = _join(
        (
            _share(words.confidence, readiness, "confidence"),
            _share(words.coverage, readiness, "coverage"),
        )
    )
    milestone = _fill(words.milestone, milestone=readiness.milestone)
    text = f"{words.readiness.format(milestone=milestone)}: {value}"
    if details:
        text += f" ({details})"
    if readiness.blocking_nodes:
        text += f"; {words.blocking}: {_titles(readiness.blocking_nodes)}"
    return text + "."


def _plan(words: Wording, plan: pb.LearningPlan) -> str:
    steps = "; ".join(
        f"{f'{step.position}. ' if step.position else ''}"
        f"{step.node_title or _term(words, step.activity)}"
        f" ({_join((_term(words, step.activity), _term(words, step.status)))})"
        for step in plan.steps
    )
    head = f"{words.plan} “{plan.title}”" if plan.title else words.plan
    return f"{head}: {steps}." if steps else f"{head}."


def _next(words: Wording, experience: pb.NextExperience) -> str:
    what = experience.title or experience.node_title
    detail = _join((_term(words, experience.kind), experience.node_title))
    text = f"{words.next_experience}: {what}"
    if detail:
        text += f" ({detail})"
    if experience.reason:
        text += f" — {words.because}: {experience.reason}"
    return text
