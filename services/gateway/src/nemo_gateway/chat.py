"""StreamPrompt for tutor.chat_reply: deltas as the model sends them, the turn recorded after.

What the learner is shown is exactly what was checked, as a whole, and exactly what is recorded:

- The conversation bundle comes first; without it no prompt is sent.
- The reply goes out only once the reply so far passes the chat guardrail as a whole
  (:mod:`nemo_gateway.screen`): cleaned of hidden characters, held to sentence ends, bounded in
  characters and deltas by the prompt's own output token limit.
- Retry and fallback happen only before the first delta. Once the learner has seen text, a
  provider stream that breaks or stalls, a reply the guardrail stops, one that runs past its
  bound and the token limit all end the RPC with an error status naming what happened (never a
  clean end), and the turn is stored as PARTIAL with exactly what the learner saw and why (its
  run reason as the message's ``status_reason``), so the cut reply is never reused as context.
- A reply the caller cancels after its first delta is stored as CANCELLED.
- A broken or cancelled turn is recorded even when the caller's deadline is what broke it: that
  write gets its own :data:`BROKEN_TURN_RECORD_SECONDS` and outlives the RPC, since a reply the
  learner saw part of must never come back as a finished one.
- A finished reply passes the guardrail whole once more, then is stored as COMPLETED, together
  with a new summary when the bundle said the stored one is stale (tutor.summarize_conversation
  runs alongside the reply).
- A turn the context service refuses to store is stored again without its summary, then as a
  placeholder (the learner's message and a FAILED reply, with the context service's reason) so
  the next turn knows; the RPC then ends with TURN_NOT_RECORDED, never as a bad request of the
  caller.
- Streamed replies are never cached.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field

from nemo_core.errors import ServiceError
from nemo_core.limits import InFlightLimit
from nemo_gateway.budget import prompt_tokens
from nemo_gateway.context_client import TurnRefused
from nemo_gateway.errors import (
    answer_too_long,
    provider_timeout,
    reply_rejected,
    reply_truncated,
    stream_broken,
    turn_not_recorded,
)
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.registry import REGISTRY, AnySpec
from nemo_gateway.prompts.spec import PromptInput
from nemo_gateway.prompts.tutor.chat_reply import (
    ChatReplyDraft,
    ChatVariables,
    conversation_budget,
    reply_char_limit,
    reply_problem,
)
from nemo_gateway.prompts.tutor.summarize_conversation import (
    ConversationSummaryResult,
    SummaryVariables,
    covered_turn,
)
from nemo_gateway.providers.base import (
    AnswerTooLong,
    ChatMessage,
    ModelProvider,
    ModelRequest,
    ProviderFailure,
    ProviderTimeout,
    StreamEnd,
    TextDelta,
    Usage,
)
from nemo_gateway.reasons import RunPath, RunReason
from nemo_gateway.runner import (
    BASELINE_PROVIDER,
    Clock,
    Prepared,
    PromptRunner,
    model_deadline,
    prompt_span,
    record_tally,
    run_record,
)
from nemo_gateway.screen import ReplyRejected, ReplyScreen, ReplyTooLong
from nemo_gateway.settings import GatewaySettings
from nemo_gateway.structured.pipeline import Tally
from nemo_protos.context.v1 import conversation_pb2 as conv
from nemo_protos.gateway.v1 import gateway_service_pb2 as gw_pb
from nemo_protos.gateway.v1 import run_pb2

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = "tutor.summarize_conversation"
BROKEN_TURN_RECORD_SECONDS = 2.0
TURN_RECORD_RESERVE_SECONDS = 0.25
"""Kept back from the model's share of the caller's deadline, besides the fallback reserve: a
baseline reply is recorded (a context service write) before the stream ends."""


@dataclass
class _Reply:
    """What the model has streamed so far, what the learner has seen of it, and how it ended."""

    screen: ReplyScreen
    parts: list[str] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    end: StreamEnd | None = None
    failure: ProviderFailure | None = None
    rejected: ReplyRejected | None = None
    too_long: bool = False

    def settle(self) -> tuple[RunPath, str]:
        """Add what the clean end reported to the tally; (path, reason): MODEL for a whole
        accepted reply; otherwise FALLBACK when the learner saw nothing (the baseline replaces
        it), or PARTIAL with the reason it broke off."""
        end = self.end
        if end is not None:
            self.tally.finish_reasons.append(end.finish_reason)
            self.tally.response_model = end.response_model
            self.tally.add_usage(end.usage)
        elif self.tally.requests:
            self.tally.add_usage(Usage())  # a stream that never ended reported no usage
        if self.rejected is not None:
            reason: str = RunReason.GUARDRAIL_REJECTED
        elif self.too_long:
            reason = RunReason.ANSWER_TOO_LONG
        elif self.failure is not None:
            reason = self.failure.code
        elif end is not None and end.truncated:
            reason = RunReason.TRUNCATED
        elif not self.screen.shown:
            reason = RunReason.EMPTY_REPLY
        else:
            return RunPath.MODEL, ""
        return (RunPath.PARTIAL if self.screen.shown else RunPath.FALLBACK), reason


class ChatStreamer:
    """Streams one chat turn and records it."""

    def __init__(
        self,
        settings: GatewaySettings,
        provider: ModelProvider | None,
        runner: PromptRunner,
        provider_limit: InFlightLimit,
    ) -> None:
        self._settings = settings
        self._provider = provider
        self._runner = runner
        self._provider_limit = provider_limit
        summary_spec = REGISTRY.get(SUMMARY_PROMPT)
        if summary_spec is None:
            raise LookupError(f"{SUMMARY_PROMPT} is not registered")
        self._summary_spec: AnySpec = summary_spec
        # Records of broken turns run on after their RPC ends; the loop holds tasks weakly.
        self._broken_records: set[asyncio.Task[None]] = set()

    async def stream(
        self, spec: AnySpec, variables: ChatVariables, lang: Lang, clock: Clock
    ) -> AsyncIterator[gw_pb.StreamPromptResponse]:
        bundle = await self._runner.context.build_conversation(
            variables.session_id,
            variables.turn_id,
            variables.user_message,
            conversation_budget(variables.token_budget, lang),
        )
        prompt: PromptInput[ChatVariables] = PromptInput(
            variables, lang, clock.evaluated_at, conversation=bundle
        )
        summary = (
            asyncio.create_task(self._summarize(bundle, lang, clock))
            if bundle.meta.summary_stale and covered_turn(bundle)
            else None
        )
        try:
            async for response in self._reply(spec, prompt, clock, summary):
                yield response
        finally:
            if summary is not None and not summary.done():
                summary.cancel()

    async def _reply(
        self,
        spec: AnySpec,
        prompt: PromptInput[ChatVariables],
        clock: Clock,
        summary: asyncio.Task[conv.SummaryUpdate | None] | None,
    ) -> AsyncIterator[gw_pb.StreamPromptResponse]:
        provider = self._provider
        messages = spec.render(prompt)
        skip = self._skip_reason(spec, messages)
        if provider is None or skip is not None:
            names = (provider.name, self._settings.model_for(spec.tier)) if provider else ("", "")
            name, model = names if skip is RunReason.INPUT_TOO_LONG else (BASELINE_PROVIDER, "")
            async for response in self._fallback(
                spec,
                prompt,
                clock,
                summary,
                skip or RunReason.BASELINE_PROVIDER,
                Tally(),
                name,
                model,
            ):
                yield response
            return
        model = self._settings.model_for(spec.tier)
        request = ModelRequest(
            model=model,
            messages=messages,
            max_output_tokens=self._settings.output_tokens(spec.max_output_tokens),
            temperature=spec.temperature,
            output_schema=None,
            reasoning=spec.reasoning,
        )
        screen = ReplyScreen(
            lambda text: reply_problem(text, prompt) or _key_problem(provider, text),
            max_chars=reply_char_limit(request.max_output_tokens),
            max_deltas=request.max_output_tokens,
        )
        reply = _Reply(screen)
        with prompt_span(spec, provider.name, model, "text") as span:
            async for response in self._relay(provider, request, reply, prompt):
                yield response
            path, reason = reply.settle()
            record_tally(span, reply.tally, path=path, reason=reason, input_ref=_input_ref(prompt))
        async for response in self._conclude(
            spec, prompt, clock, summary, reply, (path, reason), (provider.name, model)
        ):
            yield response

    def _skip_reason(self, spec: AnySpec, messages: tuple[ChatMessage, ...]) -> RunReason | None:
        """Why no model is asked: the kill switch, no provider, or a prompt over its limit."""
        if not self._settings.ai_enrichment_enabled:
            return RunReason.KILL_SWITCH
        if self._provider is None:
            return RunReason.BASELINE_PROVIDER
        if prompt_tokens(messages) > spec.max_input_tokens:
            return RunReason.INPUT_TOO_LONG
        return None

    async def _relay(
        self,
        provider: ModelProvider,
        request: ModelRequest,
        reply: _Reply,
        prompt: PromptInput[ChatVariables],
    ) -> AsyncIterator[gw_pb.StreamPromptResponse]:
        """The screened deltas; how the stream ended is left on ``reply``."""
        screen = reply.screen
        try:
            with self._provider_limit.hold():
                async with aclosing(self._model_deltas(provider, request, reply)) as deltas:
                    async for delta in deltas:
                        if released := screen.feed(delta):
                            yield gw_pb.StreamPromptResponse(text_delta=released)
            if reply.end is not None:
                if _over_limit(reply.end.usage, request.max_output_tokens):
                    raise ReplyTooLong
                if tail := screen.flush():
                    yield gw_pb.StreamPromptResponse(text_delta=tail)
        except AnswerTooLong as exc:
            reply.failure, reply.too_long = exc, True
        except ProviderFailure as exc:
            reply.failure = exc
        except ReplyRejected as exc:
            reply.rejected = exc
        except ReplyTooLong:
            reply.too_long = True
        except asyncio.CancelledError:
            # The caller went away mid-reply: what it saw is stored as cancelled, so the next
            # turn neither reuses nor repeats it. Shielded: this task is being cancelled.
            if screen.shown:
                await self._record_broken(prompt, screen.shown_text, conv.MESSAGE_STATUS_CANCELLED)
            raise

    async def _conclude(
        self,
        spec: AnySpec,
        prompt: PromptInput[ChatVariables],
        clock: Clock,
        summary: asyncio.Task[conv.SummaryUpdate | None] | None,
        reply: _Reply,
        outcome: tuple[RunPath, str],
        model: tuple[str, str],
    ) -> AsyncIterator[gw_pb.StreamPromptResponse]:
        """Record the turn and end the stream as the reply ended."""
        (path, reason), (provider, model_name) = outcome, model
        shown = reply.screen.shown_text
        draft = ChatReplyDraft(text=shown)
        if path is RunPath.MODEL and (problem := spec.guardrail(draft, prompt)) is not None:
            # The screen checked every release as a whole; this is the whole reply, once more.
            reply.rejected, path = ReplyRejected(problem), RunPath.PARTIAL
            reason = RunReason.GUARDRAIL_REJECTED
        if path is RunPath.PARTIAL:
            # The learner saw part of the reply: it is stored partial, never reused as context.
            await self._record_broken(prompt, shown, conv.MESSAGE_STATUS_PARTIAL, reason)
            raise _broken_off(reply)
        if path is RunPath.FALLBACK:
            async for response in self._fallback(
                spec, prompt, clock, summary, reason, reply.tally, provider, model_name
            ):
                yield response
            return
        output = spec.finish(draft, prompt)
        await self._record(prompt, shown, conv.MESSAGE_STATUS_COMPLETED, summary)
        record = run_record(
            spec, clock, run_pb2.RUN_PATH_MODEL, "", reply.tally, provider, model_name,
            input_ref=_input_ref(prompt),
        )  # fmt: skip
        yield _completed(spec, output, record)

    async def _model_deltas(
        self, provider: ModelProvider, request: ModelRequest, reply: _Reply
    ) -> AsyncGenerator[str, None]:
        """Text deltas; a stream that breaks before its first delta is started again while
        retries and time are left."""
        deadline = model_deadline(
            self._settings.fallback_reserve_seconds + TURN_RECORD_RESERVE_SECONDS
        )
        restarts = 0
        while True:
            opened = False
            try:
                async with provider.open_stream(request, deadline) as stream:
                    opened = True
                    reply.tally.requests += stream.requests
                    reply.tally.request_sha256 = stream.request_sha256
                    async for event in stream.events():
                        if isinstance(event, TextDelta):
                            reply.parts.append(event.text)
                            yield event.text
                        else:
                            reply.end = event
                    return
            except ProviderFailure as failure:
                if not opened:
                    # The transport already retried starting the response.
                    reply.tally.requests += failure.requests
                    reply.tally.request_sha256 = (
                        failure.request_sha256 or reply.tally.request_sha256
                    )
                    raise
                # A stream past its bound would be as long again: it is never restarted.
                too_long = isinstance(failure, AnswerTooLong)
                if reply.parts or too_long or restarts >= self._settings.max_retries:
                    raise
                reply.tally.add_usage(Usage())  # the broken stream reported no usage
            restarts += 1
            logger.info("restarting a model stream that broke before its first delta")

    async def _fallback(
        self,
        spec: AnySpec,
        prompt: PromptInput[ChatVariables],
        clock: Clock,
        summary: asyncio.Task[conv.SummaryUpdate | None] | None,
        reason: str,
        tally: Tally,
        provider: str,
        model: str,
    ) -> AsyncIterator[gw_pb.StreamPromptResponse]:
        """The baseline reply as one delta, recorded as a completed turn."""
        output = spec.baseline(prompt)
        yield gw_pb.StreamPromptResponse(text_delta=output.text)
        await self._record(prompt, output.text, conv.MESSAGE_STATUS_COMPLETED, summary)
        record = run_record(
            spec, clock, run_pb2.RUN_PATH_FALLBACK, reason, tally, provider, model,
            input_ref=_input_ref(prompt),
        )  # fmt: skip
        yield _completed(spec, output, record)

    async def _summarize(
        self, bundle: conv.ConversationBundle, lang: Lang, clock: Clock
    ) -> conv.SummaryUpdate | None:
        """A new summary of the turns the bundle holds; None when it could not be made."""
        prompt = PromptInput(SummaryVariables(), lang, clock.evaluated_at, conversation=bundle)
        prepared = Prepared(
            self._summary_spec,
            prompt,
            scope=f"learner:tutor_chat:{bundle.learner_ref}",
            cacheable=False,
        )
        try:
            result = await self._runner.execute(prepared, clock)
        except ServiceError as exc:
            logger.warning("conversation summary skipped", extra={"reason": exc.reason})
            return None
        summary: ConversationSummaryResult = result.output
        if not summary.summary:
            return None
        return conv.SummaryUpdate(
            summary=summary.summary, covers_through_turn_id=summary.covers_through_turn_id
        )

    async def _record_broken(
        self,
        prompt: PromptInput[ChatVariables],
        reply: str,
        status: conv.MessageStatus.ValueType,
        reason: str = "",
    ) -> None:
        """Store a turn whose reply did not finish, and why, in a task the RPC's end does not
        cancel."""
        task = asyncio.create_task(
            self._record(
                prompt, reply, status, None, seconds=BROKEN_TURN_RECORD_SECONDS, reason=reason
            )
        )
        self._broken_records.add(task)
        task.add_done_callback(self._broken_records.discard)
        await asyncio.shield(task)

    async def _record(
        self,
        prompt: PromptInput[ChatVariables],
        reply: str,
        status: conv.MessageStatus.ValueType,
        summary: asyncio.Task[conv.SummaryUpdate | None] | None,
        *,
        seconds: float | None = None,
        reason: str = "",
    ) -> None:
        """Store the turn: the learner's message and the reply with its final status (and why,
        for one that did not complete). Within the caller's deadline unless ``seconds`` is
        given."""
        variables = prompt.variables
        update = await summary if summary is not None else None
        context = self._runner.context
        ids = (variables.session_id, variables.turn_id)
        turn = _turn(variables, reply, status, reason)
        try:
            await context.record_turn(*ids, turn, update, seconds=seconds)
            return
        except TurnRefused as refused:
            if update is None:
                raise await self._placeholder(prompt, refused, seconds) from None
            logger.warning(
                "turn refused with its summary; stored without it",
                extra={"context_reason": refused.context_reason},
            )
        try:
            await context.record_turn(*ids, turn, None, seconds=seconds)
        except TurnRefused as refused:
            raise await self._placeholder(prompt, refused, seconds) from None

    async def _placeholder(
        self, prompt: PromptInput[ChatVariables], refused: TurnRefused, seconds: float | None
    ) -> ServiceError:
        """Store the learner's message with a FAILED, empty reply in place of a turn the context
        service refused, so the next turn knows; the error the RPC ends with."""
        variables = prompt.variables
        logger.error(
            "the context service refused a turn the learner saw",
            extra={"context_reason": refused.context_reason},
        )
        messages = _turn(variables, "", conv.MESSAGE_STATUS_FAILED, refused.context_reason)
        try:
            await self._runner.context.record_turn(
                variables.session_id, variables.turn_id, messages, None, seconds=seconds
            )
        except TurnRefused:
            return turn_not_recorded(refused.context_reason, placeholder=False)
        return turn_not_recorded(refused.context_reason, placeholder=True)


def _turn(
    variables: ChatVariables, reply: str, status: conv.MessageStatus.ValueType, reason: str = ""
) -> list[conv.TurnMessage]:
    """The learner's message and the reply with its final status and why it ended so."""
    return [
        conv.TurnMessage(
            role=conv.MESSAGE_ROLE_USER,
            type=conv.MESSAGE_TYPE_TEXT,
            status=conv.MESSAGE_STATUS_COMPLETED,
            content=variables.user_message,
        ),
        conv.TurnMessage(
            role=conv.MESSAGE_ROLE_ASSISTANT,
            type=conv.MESSAGE_TYPE_TEXT,
            status=status,
            content=reply,
            status_reason=reason,
        ),
    ]


def _key_problem(provider: ModelProvider, text: str) -> str | None:
    """A reply that repeats the provider's key (split across deltas, past the provider's own
    redaction of each) stops."""
    return "reply repeats the provider's key" if provider.echoes_key(text) else None


def _over_limit(usage: Usage, max_output_tokens: int) -> bool:
    """Whether the provider says it wrote more tokens than the request allowed."""
    return usage.output_tokens is not None and usage.output_tokens > max_output_tokens


def _broken_off(reply: _Reply) -> ServiceError:
    """The error a reply that broke off after its first delta ends the RPC with."""
    if reply.rejected is not None:
        logger.warning("chat reply stopped by its guardrail", extra={"why": reply.rejected.problem})
        return reply_rejected()
    if reply.too_long:
        return answer_too_long()
    if isinstance(reply.failure, ProviderTimeout):
        return provider_timeout()
    return stream_broken() if reply.failure is not None else reply_truncated()


def _input_ref(prompt: PromptInput[ChatVariables]) -> str:
    """The snapshot of the conversation bundle the turn was built from ("" if none was written)."""
    return prompt.conversation.input_ref if prompt.conversation is not None else ""


def _completed(
    spec: AnySpec, output: object, record: run_pb2.RunRecord
) -> gw_pb.StreamPromptResponse:
    return gw_pb.StreamPromptResponse(
        completed=gw_pb.StreamCompleted(output=spec.to_proto(output), run=record)
    )
