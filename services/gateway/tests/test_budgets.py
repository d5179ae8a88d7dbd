"""Every prompt's max_input_tokens holds for the whole rendered prompt, re-asks included, and a
caller's conversation budget is bounded by what the chat prompt can take."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC
from typing import Any

import grpc
import pytest

from nemo_core.client import create_channel
from nemo_core.errors import error_details
from nemo_core.limits import InFlightLimit
from nemo_gateway.budget import prompt_tokens
from nemo_gateway.cache import ResultCache
from nemo_gateway.context_client import ContextClient
from nemo_gateway.errors import provider_busy
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.learner.shared import NoVariables
from nemo_gateway.prompts.learner.tutor_hint import TutorHintVariables
from nemo_gateway.prompts.registry import REGISTRY
from nemo_gateway.prompts.spec import PromptInput, Rpc, Strict
from nemo_gateway.prompts.tutor.chat_reply import CHAT_MAX_INPUT_TOKENS, conversation_budget
from nemo_gateway.providers.factory import build_provider
from nemo_gateway.runner import Clock, Prepared, PromptRunner
from nemo_gateway.settings import GatewaySettings
from nemo_protos.context.v1 import learner_context_pb2 as ctx
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing.providers import Answer, ScriptedProvider
from nemo_testing.registrations import Table

from .gateway_testing import CONTEXT_CLIENT_TOKEN, FIXED_TIME, LLM_KEY, StartGateway, prompt_ids

#: Each prompt that runs on a learner bundle: its variables and a valid model answer.
LEARNER_PROMPTS: dict[str, tuple[Strict, dict[str, Any]]] = {
    "learner.tutor_hint": (TutorHintVariables(), {"hint": "Gợi ý."}),
    "learner.plan_explanation": (
        NoVariables(),
        {"explanation": "Kế hoạch.", "key_points": ["Ý một."]},
    ),
    "learner.portrait_summary": (
        NoVariables(),
        {"summary": "Chân dung.", "strengths": [], "growth_areas": []},
    ),
}
LEARNER_TABLE = Table(
    "LEARNER_PROMPTS in services/gateway/tests/test_budgets.py",
    "its variables and a valid model answer",
)
#: The prompts whose input grows with the learner's rendered context.
BUNDLED = sorted(prompt_ids(Rpc.RUN_PROMPT, learner=True))
CLOCK = Clock(FIXED_TIME.ToDatetime(tzinfo=UTC), from_server=False)


@pytest.fixture
async def runner(provider: ScriptedProvider) -> AsyncIterator[PromptRunner]:
    settings = GatewaySettings(
        client_token=CONTEXT_CLIENT_TOKEN,
        provider="openai",
        llm_base_url=provider.openai_base_url,
        llm_api_key=LLM_KEY,
        cache_max_entries=0,
    )
    model = build_provider(settings)
    assert model is not None
    channel = create_channel("127.0.0.1:9", settings)
    yield PromptRunner(
        settings, model, ContextClient(channel), ResultCache(0, 1), InFlightLimit(4, provider_busy)
    )
    await channel.close()
    await model.aclose()


def _prepared(prompt_id: str, rendered_chars: int) -> Prepared:
    spec = REGISTRY.get(prompt_id)
    assert spec is not None
    bundle = ctx.ContextBundle(learner_ref="nemo_aaaaaaaaaaaa", rendered_text="a" * rendered_chars)
    variables = LEARNER_TABLE.entry_of(LEARNER_PROMPTS, prompt_id)[0]
    prompt: PromptInput[Any] = PromptInput(variables, Lang.VI, CLOCK.evaluated_at, context=bundle)
    return Prepared(spec, prompt, "learner:x")


def _chars_to_fill(prompt_id: str, spare_tokens: int) -> int:
    """Characters of rendered context that leave ``spare_tokens`` below the prompt's limit."""
    spec = REGISTRY.get(prompt_id)
    assert spec is not None
    base = prompt_tokens(spec.render(_prepared(prompt_id, 0).prompt), spec.request_schema)
    return (spec.max_input_tokens - base - spare_tokens) * 3


def test_every_prompt_on_a_learner_bundle_has_its_budget_case() -> None:
    assert not (gaps := LEARNER_TABLE.gaps(LEARNER_PROMPTS, BUNDLED)), gaps


@pytest.mark.parametrize("prompt_id", BUNDLED)
async def test_a_prompt_over_its_input_limit_is_never_sent(
    prompt_id: str, runner: PromptRunner, provider: ScriptedProvider
) -> None:
    over = await runner.execute(_prepared(prompt_id, _chars_to_fill(prompt_id, -1)), CLOCK)
    assert (over.record.reason, over.record.attempts) == ("INPUT_TOO_LONG", 0)
    assert provider.requests == []
    valid = LEARNER_TABLE.entry_of(LEARNER_PROMPTS, prompt_id)[1]
    provider.script(Answer(json.dumps(valid, ensure_ascii=False)))
    within = await runner.execute(_prepared(prompt_id, _chars_to_fill(prompt_id, 0)), CLOCK)
    assert (within.record.reason, within.record.attempts) == ("", 1)
    assert len(provider.requests) == 1


async def test_a_reask_that_would_pass_the_limit_is_not_sent(
    runner: PromptRunner, provider: ScriptedProvider
) -> None:
    # Room for the first request, not for it plus a long unusable answer and the re-ask.
    provider.script(Answer(json.dumps({"hint": "x" * 3000, "extra": 1})))
    result = await runner.execute(
        _prepared("learner.tutor_hint", _chars_to_fill("learner.tutor_hint", 50)), CLOCK
    )
    assert (result.record.reason, result.record.attempts) == ("REASK_TOO_LONG", 1)
    assert len(provider.requests) == 1


def test_the_conversation_budget_is_the_callers_within_the_chat_prompts_room() -> None:
    room = conversation_budget(0, Lang.VI)
    assert 0 < room < CHAT_MAX_INPUT_TOKENS
    assert conversation_budget(100, Lang.VI) == 100
    assert conversation_budget(CHAT_MAX_INPUT_TOKENS, Lang.VI) == room


@pytest.mark.parametrize("budget", [-1, CHAT_MAX_INPUT_TOKENS + 1, 2**31 - 1])
async def test_a_chat_token_budget_out_of_bounds_is_invalid(
    budget: int, start_gateway: StartGateway
) -> None:
    gateway = await start_gateway()
    request = pb.StreamPromptRequest(
        prompt_id="tutor.chat_reply", session_id="S", turn_id="T", user_message="Chào",
        token_budget=budget,
    )  # fmt: skip
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        async for _ in gateway.stub.StreamPrompt(request, metadata=gateway.metadata, timeout=5):
            pass
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(raised.value).reason == "INVALID_VARIABLES"
