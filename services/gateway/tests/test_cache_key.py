"""Two runs share a cache entry only when their results are equal by construction: every field
of every prompt's input is varied, with values drawn from small sets so that different inputs
render the same prompt (two nodes with one title, one topic for two node ids), and whenever two
inputs get the same key, finishing the same model answer and the baseline give equal results."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nemo_gateway.cache import input_digest, messages_digest
from nemo_gateway.grounding.sources import NumberedSource
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.coral import evaluate_item, generate_items
from nemo_gateway.prompts.knowledge.answer import AnswerDraft, AnswerVariables
from nemo_gateway.prompts.learner.plan_explanation import PlanDraft
from nemo_gateway.prompts.learner.portrait_summary import PortraitDraft
from nemo_gateway.prompts.learner.shared import NoVariables
from nemo_gateway.prompts.learner.tutor_hint import HintDraft, TutorHintVariables
from nemo_gateway.prompts.registry import REGISTRY
from nemo_gateway.prompts.spec import PromptInput, Rpc
from nemo_protos.context.v1 import learner_context_pb2 as ctx
from nemo_testing.registrations import Table

from .gateway_testing import prompt_ids

NOW = datetime(2026, 1, 15, 8, tzinfo=UTC)
_IDS = st.sampled_from(["", "n1", "n2"])
_TITLES = st.sampled_from(["Phân số", "Hằng đẳng thức"])
_LANGS = st.sampled_from(list(Lang))
_STATES = st.sampled_from(
    [ctx.KNOWLEDGE_STATE_GAP, ctx.KNOWLEDGE_STATE_SHAKY, ctx.KNOWLEDGE_STATE_SOLID]
)


@st.composite
def _bundles(draw: st.DrawFn) -> ctx.ContextBundle:
    entries = draw(st.lists(st.tuples(_IDS.filter(bool), _TITLES, _STATES), max_size=3))
    bundle = ctx.ContextBundle(
        learner_ref=draw(st.sampled_from(["nemo_aaaaaaaaaaaa", "nemo_bbbbbbbbbbbb"])),
        rendered_text=draw(st.sampled_from(["Ngữ cảnh.", "Ngữ cảnh khác."])),
        input_ref=draw(st.sampled_from(["", "ai-context/a.json"])),
    )
    bundle.build_time.FromDatetime(NOW - timedelta(seconds=draw(st.integers(0, 5))))
    for node_id, title, state in entries:
        bundle.mastery.add(node_id=node_id, node_title=title, state=state)
    bundle.goal.title = draw(st.sampled_from(["", "Ôn thi"]))
    return bundle


def _prompt(draw: st.DrawFn, variables: Any, **extra: Any) -> PromptInput[Any]:
    evaluated = NOW + timedelta(days=draw(st.integers(0, 2)))
    return PromptInput(variables, draw(_LANGS), evaluated, **extra)


@st.composite
def _generate(draw: st.DrawFn) -> PromptInput[Any]:
    variables = generate_items.GenerateItemsVariables(
        topic=draw(_TITLES), subject=draw(st.sampled_from(["math", "physics"])),
        grade=draw(st.integers(7, 8)), node_id=draw(_IDS.filter(bool)),
        kind="short_answer", count=draw(st.integers(1, 2)),
    )  # fmt: skip
    return _prompt(draw, variables)


@st.composite
def _evaluate(draw: st.DrawFn) -> PromptInput[Any]:
    variables = evaluate_item.EvaluateItemVariables(
        stem=draw(st.sampled_from(["Tính (x + 1)².", "Tính (x - 1)²."])),
        kind=draw(st.sampled_from(["multiple_choice", "short_answer"])),
        choices=tuple(draw(st.lists(st.sampled_from(["x² + 1", "x² + 2x + 1"]), max_size=4))),
        answer_key=draw(st.sampled_from(["", "x² + 2x + 1"])),
        subject=draw(st.sampled_from(["math", "physics"])), grade=draw(st.integers(7, 8)),
    )  # fmt: skip
    return _prompt(draw, variables)


@st.composite
def _hint(draw: st.DrawFn) -> PromptInput[Any]:
    variables = TutorHintVariables(
        node_id=draw(_IDS), question=draw(st.sampled_from(["", "Câu 1?"]))
    )
    return _prompt(draw, variables, context=draw(_bundles()))


@st.composite
def _plan(draw: st.DrawFn) -> PromptInput[Any]:
    return _prompt(draw, NoVariables(), context=draw(_bundles()))


@st.composite
def _answer(draw: st.DrawFn) -> PromptInput[Any]:
    sources = tuple(
        NumberedSource(
            number, draw(_IDS.filter(bool)), draw(_TITLES), "Bình phương của một tổng.",
            draw(st.sampled_from([0.5, 1.0])), draw(st.booleans()),
        )
        for number in range(1, draw(st.integers(0, 2)) + 1)
    )  # fmt: skip
    variables = AnswerVariables(
        question=draw(st.sampled_from(["Bình phương một tổng?", "Phân số?"])),
        detailed=draw(st.booleans()),
    )
    return _prompt(draw, variables, sources=sources)


CASES = {
    "coral.generate_items": (
        _generate(),
        generate_items.DraftItems(
            items=(generate_items.DraftItem(kind="short_answer", stem="S", answer="A", rubric="R"),)
        ),
    ),
    "coral.evaluate_item": (
        _evaluate(),
        evaluate_item.ItemReview(verdict="revise", issues=("Mơ hồ.",), summary="Cần sửa."),
    ),
    "learner.tutor_hint": (_hint(), HintDraft(hint="Gợi ý.")),
    "learner.plan_explanation": (
        _plan(),
        PlanDraft(explanation="Kế hoạch.", key_points=("Ý một",)),
    ),
    "learner.portrait_summary": (
        _plan(),
        PortraitDraft(summary="Chân dung.", strengths=(), growth_areas=()),
    ),
    "knowledge.answer": (_answer(), AnswerDraft(covered=True, answer="Đúng [1].")),
}
CASES_TABLE = Table(
    "CASES in services/gateway/tests/test_cache_key.py",
    "a strategy of its inputs, drawn from small sets so that different inputs collide, and a "
    "model answer to finish",
)
#: Every prompt whose results the cache keeps: those run through RunPrompt and Answer.
CACHED = sorted(prompt_ids(Rpc.RUN_PROMPT, Rpc.ANSWER))


def test_every_cached_prompt_has_its_cases() -> None:
    assert not (gaps := CASES_TABLE.gaps(CASES, CACHED)), gaps


def _key(prompt_id: str, prompt: PromptInput[Any]) -> tuple[str, str]:
    spec = REGISTRY.get(prompt_id)
    assert spec is not None
    return messages_digest(spec.render(prompt)), input_digest(prompt)


def _results(prompt_id: str, prompt: PromptInput[Any]) -> tuple[Any, Any]:
    spec = REGISTRY.get(prompt_id)
    assert spec is not None
    return spec.finish(CASES_TABLE.entry_of(CASES, prompt_id)[1], prompt), spec.baseline(prompt)


@given(st.data())
def test_inputs_that_share_a_key_have_equal_results(data: st.DataObject) -> None:
    prompt_id = data.draw(st.sampled_from(CACHED))
    strategy = CASES_TABLE.entry_of(CASES, prompt_id)[0]
    first, second = data.draw(strategy), data.draw(strategy)
    if _key(prompt_id, first) == _key(prompt_id, second):
        assert _results(prompt_id, first) == _results(prompt_id, second)


def test_inputs_the_old_key_confused_now_get_different_keys() -> None:
    # Same rendered prompt, different results: the node id, and a focus node whose title
    # another node shares.
    first = PromptInput(
        generate_items.GenerateItemsVariables(topic="T", subject="math", grade=8, node_id="n1"),
        Lang.VI,
        NOW,
    )
    second = PromptInput(first.variables.model_copy(update={"node_id": "n2"}), Lang.VI, NOW)
    assert _key("coral.generate_items", first)[0] == _key("coral.generate_items", second)[0]
    assert _key("coral.generate_items", first) != _key("coral.generate_items", second)
    bundle = ctx.ContextBundle(learner_ref="nemo_aaaaaaaaaaaa", rendered_text="x")
    bundle.mastery.add(node_id="n1", node_title="Phân số")
    bundle.mastery.add(node_id="n2", node_title="Phân số")
    hints = [
        PromptInput(TutorHintVariables(node_id=node), Lang.VI, NOW, context=bundle)
        for node in ("n1", "n2")
    ]
    assert _key("learner.tutor_hint", hints[0])[0] == _key("learner.tutor_hint", hints[1])[0]
    assert _key("learner.tutor_hint", hints[0]) != _key("learner.tutor_hint", hints[1])


@given(st.data())
def test_the_evaluation_time_shapes_no_result(data: st.DataObject) -> None:
    # Why the key may leave it out: renderers, finishers and baselines never read it.
    prompt_id = data.draw(st.sampled_from(CACHED))
    prompt = data.draw(CASES_TABLE.entry_of(CASES, prompt_id)[0])
    later = PromptInput(
        prompt.variables, prompt.lang, prompt.evaluated_at + timedelta(days=400),
        context=prompt.context, sources=prompt.sources,
    )  # fmt: skip
    spec = REGISTRY.get(prompt_id)
    assert spec is not None
    assert spec.render(prompt) == spec.render(later)
    assert _results(prompt_id, prompt) == _results(prompt_id, later)
