"""The conversation bundle's token estimate, measured against what the gateway sends a model.

The context service estimates, without a tokenizer, the tokens of what the gateway will send from
a conversation bundle (``nemo_context.conversation.budget``) and trims the bundle to the caller's
budget by that estimate. Here real chat turns go through the gateway to the scripted provider,
which records each request body; the same estimator is applied to the messages the gateway
actually rendered (the system message without the tutor's rules, which the gateway budgets
itself, then every history message and the learner's message), and compared with the estimate
the bundle carries (its snapshot is the bundle the prompt was rendered from).

Tolerance: the estimate is never below what was sent, and at most 2% plus 8 tokens above it.

The sessions are generated: Vietnamese and English messages of every length, tool results with
their summaries, a stored summary and state, in several seeded mixtures; and a long chat of
short messages, which an estimate that charged each message for wrapping the gateway never
sends used to trim to nothing.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

import pytest

from nemo_context.conversation.budget import MESSAGE_OVERHEAD_TOKENS, estimate_tokens
from nemo_protos.context.v1 import conversation_pb2 as conv
from nemo_protos.gateway.v1 import gateway_service_pb2 as gateway_pb
from nemo_protos.gateway.v1 import run_pb2
from nemo_testing.conversations import stored_session
from nemo_testing.providers import ScriptedProvider, Stream
from tests.stack import Stack

from .support import Clients, clients, snapshot

LEARNER = "L-2041-1"
REPLY = ("Đúng rồi. ", "Em thử tiếp nhé.")

_WORDS = (
    "phân số", "mẫu số", "tử số", "rút gọn", "quy đồng", "bình phương", "hằng đẳng thức",
    "nghiệm", "phương trình", "đồ thị", "em", "ạ", "vâng", "thầy", "cô", "chưa hiểu", "tại sao",
    "fraction", "denominator", "square", "solve", "why", "okay", "thanks", "(a + b)²", "x = 3",
    "2/3", "0,75", "√2", "≥", "→", "🙂", "π", "Δ = b² - 4ac",
)  # fmt: skip
"""Words of a maths chat, in both languages, with formulas, symbols and an emoji."""


Message = tuple[str, str, str, str | None]
"""A message of a turn: role, type, content and tool summary."""


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + rng.choice(".?!")


def _history(rng: random.Random, turns: int, words: Callable[[], int]) -> list[list[Message]]:
    """``turns`` turns, each a learner's message, maybe a tool result, and the tutor's reply."""
    history = []
    for _ in range(turns):
        turn: list[Message] = [("user", "text", _sentence(rng, words()), None)]
        if rng.random() < 0.3:
            result = json.dumps({"items": [f"I-{rng.randrange(100)}"], "note": _sentence(rng, 4)})
            turn.append(("tool", "tool_result", result, _sentence(rng, words())))
        turn.append(("assistant", "text", _sentence(rng, words()), None))
        history.append(turn)
    return history


def _session(
    stack: Stack, history: Sequence[Sequence[Message]], rng: random.Random
) -> AbstractAsyncContextManager[str]:
    """A session of ``LEARNER`` holding ``history`` as completed turns T1..., with a stored
    summary of its first turn and a structured state."""
    messages = [
        (f"T{number}", *message) for number, turn in enumerate(history, start=1) for message in turn
    ]
    state = {"topic": rng.choice(_WORDS), "steps_done": rng.randrange(5), "hint_level": 1}
    return stored_session(
        stack.owner_dsn,
        LEARNER,
        messages,
        summary=(_sentence(rng, 25), len(history[0])),
        state=(state, {"step": "explain"}),
    )


async def _turn(
    grpc_clients: Clients, session_id: str, turn_id: str, message: str, token_budget: int
) -> gateway_pb.StreamCompleted:
    request = gateway_pb.StreamPromptRequest(
        prompt_id="tutor.chat_reply",
        session_id=session_id,
        turn_id=turn_id,
        user_message=message,
        token_budget=token_budget,
    )
    events = [event async for event in grpc_clients.gateway.StreamPrompt(request, timeout=20)]
    assert events[-1].HasField("completed")
    return events[-1].completed


def _sent_tokens(body: dict[str, object]) -> int:
    """The estimate of what the request carried from the bundle: the system message after the
    tutor's rules (the conversation data in its tag), and every other message with its
    overhead."""
    messages = body["messages"]
    assert isinstance(messages, list)
    system, *chat = messages
    assert system["role"] == "system"
    rules, data = str(system["content"]).split("\n\n", 1)
    assert rules
    assert data.startswith("<")
    return estimate_tokens(data) + sum(
        estimate_tokens(str(message["content"])) + MESSAGE_OVERHEAD_TOKENS for message in chat
    )


def _within_tolerance(estimated: int, sent: int) -> bool:
    """Never below what was sent; above it by at most 2% and 8 tokens (see the docstring)."""
    return sent <= estimated <= sent + round(0.02 * sent) + 8


async def _measure(
    stack: Stack,
    provider: ScriptedProvider,
    history: Sequence[Sequence[Message]],
    message: str,
    rng: random.Random,
    token_budget: int = 0,
) -> tuple[conv.ConversationBundle, dict[str, object]]:
    """Run one turn after ``history``: the bundle the prompt was rendered from, and the body
    the provider received."""
    provider.reset()
    provider.script_stream(Stream(REPLY))
    async with _session(stack, history, rng) as session_id, clients(stack) as grpc_clients:
        completed = await _turn(
            grpc_clients, session_id, f"T{len(history) + 1}", message, token_budget
        )
        assert completed.run.path == run_pb2.RUN_PATH_MODEL, completed.run.reason
        seen = await snapshot(grpc_clients, completed.run.input_ref)
    # The reply's request streams; a stale summary is rewritten alongside, in another request.
    (body,) = [body for body in (r.json() for r in provider.requests) if body.get("stream")]
    return seen.conversation_bundle, body


@pytest.mark.parametrize("seed", range(6))
async def test_the_estimate_is_what_the_gateway_sends_within_its_tolerance(
    stack: Stack, scripted_provider: ScriptedProvider, seed: int
) -> None:
    rng = random.Random(seed)  # noqa: S311  a fixed mixture, not a secret
    turns = rng.randrange(1, 10)
    history = _history(rng, turns, lambda: rng.choice([1, 3, 12, 40, 120]))
    bundle, body = await _measure(
        stack, scripted_provider, history, _sentence(rng, rng.randrange(1, 30)), rng
    )
    assert bundle.recent_messages, "the history is in the bundle"
    estimated, sent = bundle.meta.estimated_tokens, _sent_tokens(body)
    assert _within_tolerance(estimated, sent), (estimated, sent)


async def test_a_long_chat_of_short_messages_keeps_its_messages(
    stack: Stack, scripted_provider: ScriptedProvider
) -> None:
    rng = random.Random(7)  # noqa: S311  a fixed mixture, not a secret
    history = _history(rng, 40, lambda: 1)
    # A budget a few dozen short messages fit in, with their overhead and the summary and state.
    bundle, body = await _measure(stack, scripted_provider, history, "Vâng ạ.", rng, 600)
    window = [message for turn in history[-8:] for message in turn]
    contents = [f"[tool] {summary}" if summary else content for _, _, content, summary in window]
    messages = body["messages"]
    assert isinstance(messages, list)
    assert [str(message["content"]) for message in messages[1:-1]] == contents
    assert bundle.meta.included_message_count == len(window)
    assert _within_tolerance(bundle.meta.estimated_tokens, _sent_tokens(body))
    assert bundle.meta.estimated_tokens <= 600
