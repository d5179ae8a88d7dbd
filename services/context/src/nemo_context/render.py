"""The one renderer: a ContextBundle as prompt text, Vietnamese by default, English on request.

It is the last place where data turns into free text, so it prints only what the bundle holds —
the pseudonym, titles, numbers and the engines' own wording — never an id of a learner or a user
(the bundle has none), and never a knowledge node id (titles are for people). The identifier gate
checks the rendered text together with the bundle. Missing values are left out or said to be
unknown; they are never printed as 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from nemo.context.v1 import learner_context_pb2 as pb
from nemo.type.v1 import locale_pb2


@dataclass(frozen=True)
class Wording:
    """Every phrase the renderer uses, in one language."""

    learner: Callable[[str, int, int | None], str]
    weakest: str
    unknown_mastery: str
    states: Mapping[int, str]
    recent_answers: Callable[[int, int, int], str]
    goal: str
    due: str
    review: str
    context: Callable[[str, str, str], str]
    focus: str
    days_per_week: Callable[[int], str]
    progress: str
    node_counts: Callable[[int, int, int, int], str]
    activity: Callable[[int | None, int | None, int | None, int | None, int | None], str]
    improved: str
    declined: str
    competencies: str
    level: Callable[[int | None, int | None], str]
    confidence: str
    coverage: str
    readiness: Callable[[str], str]
    blocking: str
    plan: str
    next_experience: str
    because: str
    unknown: str
    date: Callable[[Timestamp], str]
    percent: Callable[[float], str]
    list_separator: str


def _vi_learner(ref: str, grade: int, age: int | None) -> str:
    age_part = f", {age} tuổi" if age is not None else ""
    return f"Học sinh {ref}, lớp {grade}{age_part}."


def _en_learner(ref: str, grade: int, age: int | None) -> str:
    age_part = f", {age} years old" if age is not None else ""
    return f"Learner {ref}, grade {grade}{age_part}."


def _vi_activity(
    sessions: int | None,
    minutes: int | None,
    attempted: int | None,
    correct: int | None,
    streak: int | None,
) -> str:
    parts = []
    if sessions is not None:
        parts.append(f"{sessions} buổi học")
    if minutes is not None:
        parts.append(f"{minutes} phút")
    if attempted is not None and correct is not None:
        parts.append(f"đúng {correct}/{attempted} câu")
    if streak is not None:
        parts.append(f"chuỗi {streak} ngày liên tiếp")
    return ", ".join(parts)


def _en_activity(
    sessions: int | None,
    minutes: int | None,
    attempted: int | None,
    correct: int | None,
    streak: int | None,
) -> str:
    parts = []
    if sessions is not None:
        parts.append(f"{sessions} sessions")
    if minutes is not None:
        parts.append(f"{minutes} minutes")
    if attempted is not None and correct is not None:
        parts.append(f"{correct}/{attempted} items correct")
    if streak is not None:
        parts.append(f"a {streak}-day streak")
    return ", ".join(parts)


def _level(word: str) -> Callable[[int | None, int | None], str]:
    def level(value: int | None, maximum: int | None) -> str:
        if value is None:
            return ""
        return f"{word} {value}/{maximum}" if maximum is not None else f"{word} {value}"

    return level


def _percent(value: float) -> str:
    return f"{round(value * 100)}%"


VIETNAMESE: Final = Wording(
    learner=_vi_learner,
    weakest="Đang yếu nhất",
    unknown_mastery="chưa có số liệu",
    states={
        pb.KNOWLEDGE_STATE_UNKNOWN: "chưa đủ dữ liệu",
        pb.KNOWLEDGE_STATE_GAP: "lỗ hổng",
        pb.KNOWLEDGE_STATE_SHAKY: "chưa vững",
        pb.KNOWLEDGE_STATE_SOLID: "vững",
    },
    recent_answers=lambda n, right, wrong: f"{n} lần trả lời gần nhất: đúng {right}, sai {wrong}.",
    goal="Mục tiêu",
    due="hạn",
    review="Cần ôn lại",
    context=lambda subject, strand, package: (
        f"Đang học: môn {subject}, mạch {strand}" + (f", gói “{package}”" if package else "")
    ),
    focus="trọng tâm",
    days_per_week=lambda days: f"{days} ngày học mỗi tuần",
    progress="Tiến độ",
    node_counts=lambda solid, shaky, gap, unknown: (
        f"{solid} nút vững, {shaky} chưa vững, {gap} lỗ hổng, {unknown} chưa đủ dữ liệu"
    ),
    activity=_vi_activity,
    improved="tiến bộ",
    declined="đi xuống",
    competencies="Năng lực",
    level=_level("mức"),
    confidence="độ tin cậy",
    coverage="độ phủ",
    readiness=lambda milestone: "Mức sẵn sàng" + (f" cho “{milestone}”" if milestone else ""),
    blocking="đang cản",
    plan="Kế hoạch",
    next_experience="Hoạt động tiếp theo",
    because="lý do",
    unknown="chưa rõ",
    date=lambda stamp: stamp.ToDatetime().strftime("%d/%m/%Y"),
    percent=_percent,
    list_separator=", ",
)

ENGLISH: Final = Wording(
    learner=_en_learner,
    weakest="Weakest first",
    unknown_mastery="no estimate",
    states={
        pb.KNOWLEDGE_STATE_UNKNOWN: "too little evidence",
        pb.KNOWLEDGE_STATE_GAP: "gap",
        pb.KNOWLEDGE_STATE_SHAKY: "shaky",
        pb.KNOWLEDGE_STATE_SOLID: "solid",
    },
    recent_answers=lambda n, right, wrong: f"Last {n} answers: {right} correct, {wrong} incorrect.",
    goal="Goal",
    due="due",
    review="Due for review",
    context=lambda subject, strand, package: (
        f"Studying: {subject}, strand {strand}" + (f", package “{package}”" if package else "")
    ),
    focus="focus",
    days_per_week=lambda days: f"{days} study days a week",
    progress="Progress",
    node_counts=lambda solid, shaky, gap, unknown: (
        f"{solid} nodes solid, {shaky} shaky, {gap} gaps, {unknown} with too little evidence"
    ),
    activity=_en_activity,
    improved="improved",
    declined="declined",
    competencies="Competencies",
    level=_level("level"),
    confidence="confidence",
    coverage="coverage",
    readiness=lambda milestone: "Readiness" + (f" for “{milestone}”" if milestone else ""),
    blocking="held back by",
    plan="Plan",
    next_experience="Next experience",
    because="reason",
    unknown="unknown",
    date=lambda stamp: stamp.ToDatetime().strftime("%Y-%m-%d"),
    percent=_percent,
    list_separator=", ",
)

WORDING: Final[Mapping[int, Wording]] = {
    locale_pb2.LOCALE_UNSPECIFIED: VIETNAMESE,
    locale_pb2.LOCALE_VI: VIETNAMESE,
    locale_pb2.LOCALE_EN: ENGLISH,
}


def render_bundle(bundle: pb.ContextBundle) -> str:
    """The bundle as prompt text in ``bundle.locale``; one line per slice the bundle holds."""
    words = WORDING.get(bundle.locale, VIETNAMESE)
    lines: list[str] = []
    if bundle.HasField("profile"):
        age = bundle.profile.age_years if bundle.profile.HasField("age_years") else None
        lines.append(words.learner(bundle.learner_ref, bundle.profile.grade, age))
    if bundle.mastery:
        lines.append(f"{words.weakest}: {_join(words, _mastery(words, bundle.mastery))}.")
    if bundle.HasField("recent_evidence") and bundle.recent_evidence.items:
        evidence = bundle.recent_evidence
        lines.append(
            words.recent_answers(
                len(evidence.items), evidence.correct_count, evidence.incorrect_count
            )
        )
    if bundle.HasField("goal"):
        lines.append(_goal(words, bundle.goal))
    if bundle.retention:
        lines.append(f"{words.review}: {_join(words, _retention(words, bundle.retention))}.")
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
    return "\n".join(lines)


def _join(words: Wording, parts: Iterable[str]) -> str:
    return words.list_separator.join(part for part in parts if part)


def _titles(words: Wording, nodes: Iterable[pb.NodeRef]) -> str:
    return _join(words, (node.node_title for node in nodes))


def _mastery(words: Wording, entries: Iterable[pb.MasteryEntry]) -> Iterable[str]:
    for entry in entries:
        value = words.percent(entry.mastery) if entry.HasField("mastery") else None
        state = words.states.get(entry.state, "")
        detail = _join(words, (value or words.unknown_mastery, state))
        yield f"{entry.node_title} ({detail})"


def _goal(words: Wording, goal: pb.Goal) -> str:
    text = f"{words.goal}: {goal.title}"
    if goal.target:
        text += f" — {goal.target}"
    if goal.HasField("due_at"):
        text += f" ({words.due} {words.date(goal.due_at)})"
    return text + "."


def _retention(words: Wording, entries: Iterable[pb.RetentionEntry]) -> Iterable[str]:
    for entry in entries:
        due = f" ({words.due} {words.date(entry.due_at)})" if entry.HasField("due_at") else ""
        yield f"{entry.node_title}{due}"


def _learning_context(words: Wording, context: pb.LearningContext) -> str:
    parts = [words.context(context.subject, context.strand, context.package_title)]
    if context.focus_nodes:
        parts.append(f"{words.focus}: {_titles(words, context.focus_nodes)}")
    if context.HasField("study_days_per_week"):
        parts.append(words.days_per_week(context.study_days_per_week))
    return "; ".join(parts) + "."


def _optional(message: Message, field: str) -> int | None:
    value: int = getattr(message, field)
    return value if message.HasField(field) else None


def _progress(words: Wording, progress: pb.LearningProgress) -> str:
    head = f"{words.progress} {progress.period}".rstrip()
    parts = [
        words.activity(
            _optional(progress, "sessions"),
            _optional(progress, "minutes"),
            _optional(progress, "items_attempted"),
            _optional(progress, "items_correct"),
            _optional(progress, "streak_days"),
        ),
        words.node_counts(
            progress.solid_count, progress.shaky_count, progress.gap_count, progress.unknown_count
        ),
    ]
    if progress.improved_nodes:
        parts.append(f"{words.improved}: {_titles(words, progress.improved_nodes)}")
    if progress.declined_nodes:
        parts.append(f"{words.declined}: {_titles(words, progress.declined_nodes)}")
    return f"{head}: " + "; ".join(part for part in parts if part) + "."


def _competencies(words: Wording, profile: pb.CompetencyProfile) -> str:
    items = []
    for competency in profile.competencies:
        level = words.level(_optional(competency, "level"), _optional(competency, "max_level"))
        confidence = (
            f"{words.confidence} {words.percent(competency.confidence)}"
            if competency.HasField("confidence")
            else ""
        )
        detail = _join(words, (level, confidence))
        items.append(f"{competency.title} ({detail})" if detail else competency.title)
    return f"{words.competencies}: {_join(words, items)}."


def _readiness(words: Wording, readiness: pb.Readiness) -> str:
    value = words.percent(readiness.readiness) if readiness.HasField("readiness") else words.unknown
    details = _join(
        words,
        (
            f"{words.confidence} {words.percent(readiness.confidence)}"
            if readiness.HasField("confidence")
            else "",
            f"{words.coverage} {words.percent(readiness.coverage)}"
            if readiness.HasField("coverage")
            else "",
        ),
    )
    text = f"{words.readiness(readiness.milestone)}: {value}"
    if details:
        text += f" ({details})"
    if readiness.blocking_nodes:
        text += f"; {words.blocking}: {_titles(words, readiness.blocking_nodes)}"
    return text + "."


def _plan(words: Wording, plan: pb.LearningPlan) -> str:
    steps = "; ".join(
        f"{step.position}. {step.node_title or step.activity}"
        f" ({_join(words, (step.activity, step.status))})"
        for step in plan.steps
    )
    return f"{words.plan} “{plan.title}”: {steps}." if steps else f"{words.plan} “{plan.title}”."


def _next(words: Wording, experience: pb.NextExperience) -> str:
    what = experience.title or experience.node_title
    detail = _join(words, (experience.kind, experience.node_title))
    text = f"{words.next_experience}: {what}"
    if detail:
        text += f" ({detail})"
    if experience.reason:
        text += f" — {words.because}: {experience.reason}"
    return text
