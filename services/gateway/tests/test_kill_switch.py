"""With AI enrichment switched off, every prompt returns its deterministic baseline, byte for
byte: the serialised output message (not the run record) is compared with golden files produced
once from the baselines.

Regenerate the golden files after an intended change of a baseline with
``NEMO_UPDATE_GOLDEN=1 uv run pytest services/gateway/tests/test_kill_switch.py`` and review
the diff.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from google.protobuf.message import Message

from nemo_gateway.lang import Lang
from nemo_gateway.prompts.coral import evaluate_item
from nemo_gateway.prompts.registry import REGISTRY
from nemo_gateway.prompts.spec import PromptInput, Rpc
from nemo_protos.gateway.v1 import answer_pb2, run_pb2
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.type.v1 import locale_pb2
from nemo_testing.providers import ScriptedProvider
from nemo_testing.registrations import Table

from .gateway_testing import (
    FIXED_TIME,
    Gateway,
    StartGateway,
    chat_session,
    prompt_ids,
    stored_messages,
    variables,
)

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("NEMO_UPDATE_GOLDEN") == "1"

GENERATE = {
    "topic": "Hằng đẳng thức",
    "subject": "math",
    "grade": 8,
    "node_id": "math-08-algebraic-identities",
    "count": 3,
}
EVALUATE = {
    "stem": "Khai triển (x + 3)².",
    "kind": "multiple_choice",
    "choices": ["x² + 9", "x² + 6x + 9", "x² + 3x + 9", "x² + 6x + 9"],
    "answer_key": "x² + 6x",
    "subject": "math",
    "grade": 8,
}
PASSAGES = [
    {
        "document_id": "math-08-algebraic-identities",
        "title": "Hằng đẳng thức",
        "text": "Bình phương của một tổng bằng bình phương số thứ nhất cộng hai lần tích hai số "
        "cộng bình phương số thứ hai. Ví dụ (x + 3)² = x² + 6x + 9.",
        "score": 2.0,
    },
    {
        "document_id": "math-08-factorization",
        "title": "Phân tích đa thức thành nhân tử",
        "text": "Có thể dùng hằng đẳng thức để phân tích đa thức thành nhân tử.",
        "score": 1.0,
    },
]

RUN_CASES: dict[str, pb.RunPromptRequest] = {
    "coral.generate_items": pb.RunPromptRequest(
        prompt_id="coral.generate_items", variables=variables(**GENERATE)
    ),
    "coral.generate_items.en": pb.RunPromptRequest(
        prompt_id="coral.generate_items",
        variables=variables(**GENERATE),
        locale=locale_pb2.LOCALE_EN,
    ),
    "coral.evaluate_item": pb.RunPromptRequest(
        prompt_id="coral.evaluate_item", variables=variables(**EVALUATE)
    ),
    "learner.tutor_hint": pb.RunPromptRequest(
        prompt_id="learner.tutor_hint",
        learner_id="L-2041-1",
        variables=variables(node_id="math-08-algebraic-identities"),
    ),
    "learner.tutor_hint.weakest": pb.RunPromptRequest(
        prompt_id="learner.tutor_hint", learner_id="L-2041-3", locale=locale_pb2.LOCALE_EN
    ),
    "learner.plan_explanation": pb.RunPromptRequest(
        prompt_id="learner.plan_explanation", learner_id="L-2041-1"
    ),
    "learner.portrait_summary": pb.RunPromptRequest(
        prompt_id="learner.portrait_summary", learner_id="L-2041-1"
    ),
    "knowledge.answer": pb.RunPromptRequest(
        prompt_id="knowledge.answer",
        variables=variables(question="(x + 3)² bằng gì?", passages=PASSAGES),
    ),
    "knowledge.answer.uncovered": pb.RunPromptRequest(
        prompt_id="knowledge.answer",
        variables=variables(question="Trường mở cửa lúc mấy giờ?", passages=[]),
    ),
}


RUN_TABLE = Table(
    "RUN_CASES in services/gateway/tests/test_kill_switch.py",
    "a request case, then write its golden file with NEMO_UPDATE_GOLDEN=1",
)
#: The streamed prompt, checked by the chat test at the end of this file.
CHAT_PROMPT = "tutor.chat_reply"
#: Prompts whose output is for content authors, not learners: the only ones without a
#: disclaimer.
AUTHOR_FACING = frozenset({"coral.generate_items", "coral.evaluate_item"})


def test_every_prompt_a_caller_can_run_has_a_kill_switch_case() -> None:
    covered = {case.prompt_id for case in RUN_CASES.values()}
    assert not (gaps := RUN_TABLE.gaps(covered, prompt_ids(Rpc.RUN_PROMPT, Rpc.ANSWER))), gaps
    streamed = prompt_ids(Rpc.STREAM_PROMPT)
    assert streamed == {CHAT_PROMPT}, (
        f"{sorted(streamed - {CHAT_PROMPT})} has no kill-switch test: write one like "
        "test_the_chat_reply_is_the_baseline_and_the_turn_is_recorded"
    )


def _check_golden(name: str, message: Message) -> None:
    path = GOLDEN_DIR / f"{name}.binpb"
    serialized = message.SerializeToString(deterministic=True)
    if UPDATE:
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_bytes(serialized)
    assert path.exists(), f"no golden file {path.name}: run with NEMO_UPDATE_GOLDEN=1"
    assert serialized == path.read_bytes(), f"{name} differs from its golden file"


@pytest.fixture
async def switched_off(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str
) -> AsyncIterator[Gateway]:
    """A gateway with a model configured but AI enrichment switched off."""
    gateway = await start_gateway(ai_enrichment_enabled=False, context_address=context_address)
    yield gateway
    assert provider.requests == [], "the kill switch must stop every model call"


@pytest.mark.parametrize("name", sorted(RUN_CASES))
async def test_every_prompt_returns_its_baseline_byte_for_byte(
    name: str, switched_off: Gateway
) -> None:
    request = pb.RunPromptRequest()
    request.CopyFrom(RUN_CASES[name])
    request.evaluate_time.CopyFrom(FIXED_TIME)
    response = await switched_off.stub.RunPrompt(
        request, metadata=switched_off.metadata, timeout=10
    )
    assert (response.run.path, response.run.reason, response.run.provider) == (
        run_pb2.RUN_PATH_FALLBACK,
        "KILL_SWITCH",
        "baseline",
    )
    assert response.run.attempts == 0
    _check_golden(name, response.output)
    shown = getattr(response.output, response.output.WhichOneof("output") or "")
    if "disclaimer" in shown.DESCRIPTOR.fields_by_name:
        assert shown.disclaimer, "a learner-facing output needs its disclaimer"


def test_every_learner_facing_output_has_a_disclaimer_field() -> None:
    shown = [spec for spec in REGISTRY if spec.rpc is not Rpc.INTERNAL]
    assert {spec.prompt_id for spec in shown} >= AUTHOR_FACING
    for spec in shown:
        has_one = "disclaimer" in spec.output_descriptor.fields_by_name
        assert has_one is (spec.prompt_id not in AUTHOR_FACING), (
            f"{spec.prompt_id}: a learner-facing output has a disclaimer field "
            f"({spec.output_descriptor.name} in protos/nemo/gateway/v1/), and only those; an "
            "output for content authors is listed in AUTHOR_FACING"
        )


async def test_the_golden_output_is_what_the_baseline_function_returns(
    switched_off: Gateway,
) -> None:
    request = RUN_CASES["coral.evaluate_item"]
    response = await switched_off.stub.RunPrompt(
        request, metadata=switched_off.metadata, timeout=10
    )
    prompt = PromptInput(
        evaluate_item.EvaluateItemVariables.model_validate(EVALUATE),
        Lang.VI,
        FIXED_TIME.ToDatetime(),
    )
    expected = evaluate_item.SPEC.to_proto(evaluate_item.baseline(prompt))
    assert response.output.SerializeToString(deterministic=True) == expected.SerializeToString(
        deterministic=True
    )


async def test_the_answer_rpc_returns_the_baseline_answer(switched_off: Gateway) -> None:
    response = await switched_off.stub.Answer(
        pb.AnswerRequest(
            question="(x + 3)² bằng gì?",
            passages=[answer_pb2.Passage(**passage) for passage in PASSAGES],  # type: ignore[arg-type]
            evaluate_time=FIXED_TIME,
        ),
        metadata=switched_off.metadata,
        timeout=10,
    )
    assert response.run.reason == "KILL_SWITCH"
    golden = pb.RunPromptResponse()
    golden.output.ParseFromString((GOLDEN_DIR / "knowledge.answer.binpb").read_bytes())
    assert response.answer == golden.output.grounded_answer


async def test_the_chat_reply_is_the_baseline_and_the_turn_is_recorded(
    switched_off: Gateway, owner_dsn: str
) -> None:
    async with chat_session(owner_dsn) as session_id:
        request = pb.StreamPromptRequest(
            prompt_id=CHAT_PROMPT,
            session_id=session_id,
            turn_id="T2",
            user_message="Vậy (x + 3)² bằng bao nhiêu ạ?",
            evaluate_time=FIXED_TIME,
        )
        events = [
            event
            async for event in switched_off.stub.StreamPrompt(
                request, metadata=switched_off.metadata, timeout=10
            )
        ]
        completed = events[-1].completed
        assert completed.run.reason == "KILL_SWITCH"
        _check_golden(CHAT_PROMPT, completed.output)
        assert [event.text_delta for event in events[:-1]] == [completed.output.chat_reply.text]
        assert await stored_messages(owner_dsn, session_id, "T2") == [
            ("user", "completed", "Vậy (x + 3)² bằng bao nhiêu ạ?"),
            ("assistant", "completed", completed.output.chat_reply.text),
        ]
