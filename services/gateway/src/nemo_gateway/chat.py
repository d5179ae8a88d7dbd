"""StreamPrompt for tutor.chat_reply: deltas as the model sends them, the turn recorded after.

- The conversation bundle comes first; without it no prompt is sent.
- Retry and fallback happen only before the first delta. Once the learner has seen text, a
  provider stream that breaks ends the RPC with an error status (never a clean end) and the turn
  is stored as PARTIAL, so the cut reply is never reused as context. A reply stopped by the token
  limit is stored as PARTIAL too.
- A reply the caller cancels after its first delta is stored as CANCELLED.
- A broken or cancelled turn is recorded even when the caller's deadline is what broke it: that
  write gets its own :data:`BROKEN_TURN_RECORD_SECONDS` and outlives the RPC, since a reply the
  learner saw part of must never come back as a finished one.
- A finished reply is stored as COMPLETED, together with a new summary when the bundle said the
  stored one is stale (tutor.summarize_conversation runs alongside the reply).
- Streamed replies are never cached.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from nemo.context.v1 import conversation_pb2 as conv
from nemo.gateway.v1 import gateway_service_pb2 as gw_pb
from nemo.gateway.v1 import run_pb2
from nemo_core.errors import ServiceError
from nemo_gateway.errors import reply_truncated, stream_broken
from nemo_gateway.limits import InFlightLimit
from nemo_gateway.prompts.registry import REGISTRY, AnySpec
from nemo_gateway.prompts.spec import Lang, PromptInput
from nemo_gateway.prompts.tutor import (
    ChatReplyDraft,
    ChatVariables,
    ConversationSummaryResult,
    SummaryVariables,
    covered_turn,
)
from nemo_gateway.providers.base import (
    ModelProvider,
    ModelRequest,
    ProviderFailure,
    StreamEnd,
    TextDelta,
)
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
from nemo_gateway.settings import GatewaySettings
from nemo_gateway.structured.pipeline import Reason, Tally

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = "tutor.summarize_conversation"
BROKEN_TURN_RECORD_SECONDS = 2.0
EMPTY_REPLY = "EMPTY_REPLY"


@dataclass
class _Reply:
    """What the model has streamed so far."""

    parts: list[str]
    tally: Tally
    end: StreamEnd | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)


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
            variables.session_id, variables.turn_id, variables.user_message, variables.token_budget
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
        if not self._settings.ai_enrichment_enabled or provider is None:
            enabled = self._settings.ai_enrichment_enabled
            reason: str = Reason.BASELINE_PROVIDER if enabled else Reason.KILL_SWITCH
            async for response in self._fallback(
                spec, prompt, clock, summary, reason, Tally(), BASELINE_PROVIDER, ""
            ):
                yield response
            return
        model = self._settings.model_for(spec.tier)
        request = ModelRequest(
            model=model,
            messages=spec.render(prompt),
            max_output_tokens=spec.max_output_tokens,
            temperature=spec.temperature,
            output_schema=None,
        )
        reply = _Reply([], Tally())
        with prompt_span(spec, provider.name, model, "text") as span:
            failure: ProviderFailure | None = None
            try:
                with self._provider_limit.hold():
                    async for delta in self._model_deltas(provider, request, reply):
                        yield gw_pb.StreamPromptResponse(text_delta=delta)
            except ProviderFailure as exc:
                failure = exc
            except asyncio.CancelledError:
                # The caller went away mid-reply: what it saw is stored as cancelled, so the
                # next turn neither reuses nor repeats it. Shielded: this task is being cancelled.
                if reply.parts:
                    await self._record_broken(prompt, reply.text, conv.MESSAGE_STATUS_CANCELLED)
                raise
            tally = reply.tally
            end = reply.end
            if end is not None:
                tally.finish_reasons.append(end.finish_reason)
                tally.response_model = end.response_model
                tally.add_usage(end.usage)
            record_tally(
                span, tally, path="FALLBACK" if failure and not reply.parts else "MODEL",
                reason=failure.code if failure else "", input_ref=_input_ref(prompt),
            )  # fmt: skip
        if reply.parts and (failure is not None or (end is not None and end.truncated)):
            await self._record_broken(prompt, reply.text, conv.MESSAGE_STATUS_PARTIAL)
            raise stream_broken() if failure is not None else reply_truncated()
        if failure is not None or not reply.parts:
            if failure is not None:
                reason = failure.code
            else:
                reason = Reason.TRUNCATED if end is not None and end.truncated else EMPTY_REPLY
            async for response in self._fallback(
                spec, prompt, clock, summary, reason, tally, provider.name, model
            ):
                yield response
            return
        output = spec.finish(ChatReplyDraft(text=reply.text), prompt)
        await self._record(prompt, reply.text, conv.MESSAGE_STATUS_COMPLETED, summary)
        record = run_record(
            spec, clock, run_pb2.RUN_PATH_MODEL, "", tally, provider.name, model,
            input_ref=_input_ref(prompt),
        )  # fmt: skip
        yield _completed(spec, output, record)

    async def _model_deltas(
        self, provider: ModelProvider, request: ModelRequest, reply: _Reply
    ) -> AsyncIterator[str]:
        """Text deltas; a stream that breaks before its first delta is started again while
        retries and time are left."""
        deadline = model_deadline(self._settings.fallback_reserve_seconds)
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
                if reply.parts or restarts >= self._settings.max_retries:
                    raise
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
        self, prompt: PromptInput[ChatVariables], reply: str, status: conv.MessageStatus.ValueType
    ) -> None:
        """Store a turn whose reply did not finish, in a task the RPC's end does not cancel."""
        task = asyncio.create_task(
            self._record(prompt, reply, status, None, seconds=BROKEN_TURN_RECORD_SECONDS)
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
    ) -> None:
        """Store the turn: the learner's message and the reply with its final status. Within
        the caller's deadline unless ``seconds`` is given."""
        variables = prompt.variables
        update = await summary if summary is not None else None
        messages = [
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
            ),
        ]
        await self._runner.context.record_turn(
            variables.session_id, variables.turn_id, messages, update, seconds=seconds
        )


def _input_ref(prompt: PromptInput[ChatVariables]) -> str:
    """The snapshot of the conversation bundle the turn was built from ("" if none was written)."""
    return prompt.conversation.input_ref if prompt.conversation is not None else ""


def _completed(
    spec: AnySpec, output: object, record: run_pb2.RunRecord
) -> gw_pb.StreamPromptResponse:
    return gw_pb.StreamPromptResponse(
        completed=gw_pb.StreamCompleted(output=spec.to_proto(output), run=record)
    )
