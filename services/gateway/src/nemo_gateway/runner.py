"""Runs a prompt: context first, then the kill switch, the cache, the model pipeline or the
baseline, and the run record. RunPrompt, Answer and the conversation summary all go through
:meth:`PromptRunner.execute`.
"""

from __future__ import annotations

import logging
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from google.protobuf import timestamp_pb2
from opentelemetry.trace import Span

from nemo_core.deadlines import downstream_timeout
from nemo_core.errors import ServiceError
from nemo_core.limits import InFlightLimit
from nemo_core.proto_enums import to_proto
from nemo_gateway.budget import prompt_tokens
from nemo_gateway.cache import (
    CachedRun,
    CacheKey,
    ResultCache,
    digest,
    input_digest,
    messages_digest,
)
from nemo_gateway.context_client import ContextClient
from nemo_gateway.grounding.relevance import relevant_hits
from nemo_gateway.grounding.sources import Passage, number_sources
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.knowledge.answer import AnswerVariables, source_tokens
from nemo_gateway.prompts.registry import AnySpec
from nemo_gateway.prompts.spec import PromptInput, Strict
from nemo_gateway.providers.base import ChatMessage, ModelProvider
from nemo_gateway.reasons import RunPath, RunReason
from nemo_gateway.settings import GatewaySettings
from nemo_gateway.structured.pipeline import Outcome, Tally, run_model
from nemo_gateway.telemetry import genai_span, record_result
from nemo_protos.gateway.v1 import run_pb2

logger = logging.getLogger(__name__)

BASELINE_PROVIDER = "baseline"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class RunResult:
    """The typed output and how it was produced."""

    output: Any
    record: run_pb2.RunRecord


@dataclass(frozen=True)
class Clock:
    """The evaluation time of a run, and whether it came from the server's clock."""

    evaluated_at: datetime
    from_server: bool

    def timestamp(self) -> timestamp_pb2.Timestamp:
        # What Timestamp.FromDatetime computes, with timedelta arithmetic in C instead of its
        # time-tuple conversion in Python.
        since_epoch = self.evaluated_at - _EPOCH
        return timestamp_pb2.Timestamp(
            seconds=since_epoch.days * 86_400 + since_epoch.seconds,
            nanos=since_epoch.microseconds * 1000,
        )


@dataclass(frozen=True)
class Prepared:
    """A prompt with its input gathered, ready to run."""

    spec: AnySpec
    prompt: PromptInput[Any]
    scope: str
    """The caller's permission scope; cache entries never cross it."""
    input_ref: str = ""
    cacheable: bool = True
    skip_model: RunReason | None = field(default=None)
    """Set when the input alone decides the baseline (no sources to answer from)."""


def model_deadline(reserve: float) -> float | None:
    """``time.monotonic()`` instant by which model calls must end, keeping ``reserve`` seconds
    to build and send the baseline; None when the caller set no deadline."""
    try:
        remaining = downstream_timeout(reserve)
    except ServiceError:
        return time.monotonic()  # nothing left: the provider fails fast and the baseline runs
    return None if remaining is None else time.monotonic() + remaining


def prompt_span(
    spec: AnySpec, provider: str, model: str, output_type: str
) -> AbstractContextManager[Span]:
    """The GenAI span of one run of ``spec``."""
    return genai_span(
        provider=provider,
        model=model,
        prompt_id=spec.prompt_id,
        prompt_version=spec.version,
        temperature=spec.temperature,
        max_tokens=spec.max_output_tokens,
        output_type=output_type,
    )


def record_tally(
    span: Span, tally: Tally, *, path: RunPath, reason: str, input_ref: str = ""
) -> None:
    """What the model calls of a run (not a cache hit) add up to, on its span."""
    record_result(
        span, path=path, reason=reason, attempts=tally.requests,
        input_tokens=tally.input_tokens, output_tokens=tally.output_tokens,
        response_model=tally.response_model, finish_reasons=tally.finish_reasons,
        input_ref=input_ref,
    )  # fmt: skip


def token_usage(tally: Tally) -> run_pb2.TokenUsage:
    """The run record's usage: unknown counts are flagged, never reported as 0."""
    return run_pb2.TokenUsage(
        input_tokens=tally.input_tokens or 0,
        output_tokens=tally.output_tokens or 0,
        input_tokens_unknown=tally.input_tokens is None,
        output_tokens_unknown=tally.output_tokens is None,
    )


def run_record(
    spec: AnySpec,
    clock: Clock,
    path: run_pb2.RunPath.ValueType,
    reason: str,
    tally: Tally,
    provider: str,
    model: str,
    *,
    input_ref: str = "",
    cache_hit: bool = False,
) -> run_pb2.RunRecord:
    """The record of one run of ``spec``."""
    return run_pb2.RunRecord(
        prompt_id=spec.prompt_id,
        prompt_version=spec.version,
        path=path,
        reason=reason,
        attempts=tally.requests,
        provider=provider,
        model=model,
        usage=token_usage(tally),
        input_ref=input_ref,
        request_sha256=tally.request_sha256,
        evaluate_time=clock.timestamp(),
        evaluate_time_from_server=clock.from_server,
        cache_hit=cache_hit,
    )


class PromptRunner:
    """Everything a non-streamed prompt run needs."""

    def __init__(
        self,
        settings: GatewaySettings,
        provider: ModelProvider | None,
        context: ContextClient,
        cache: ResultCache,
        provider_limit: InFlightLimit,
    ) -> None:
        self._settings = settings
        self._provider = provider
        self._context = context
        self._cache = cache
        self._provider_limit = provider_limit
        self._fixed_key_parts: dict[str, tuple[str, str]] = {}

    @property
    def context(self) -> ContextClient:
        return self._context

    async def prepare(
        self,
        spec: AnySpec,
        variables: Strict,
        *,
        lang: Lang,
        clock: Clock,
        learner_id: str,
        caller: str,
    ) -> Prepared:
        """Gather the prompt's input: the learner bundle or the numbered sources."""
        if spec.purpose is not None:
            bundle = await self._context.build_context(
                learner_id, spec.purpose, lang.to_proto(), clock.evaluated_at
            )
            prompt = PromptInput(variables, lang, clock.evaluated_at, context=bundle)
            scope = f"learner:{spec.purpose}:{bundle.learner_ref}"
            return Prepared(spec, prompt, scope, input_ref=bundle.input_ref)
        scope = f"caller:{caller}"
        if isinstance(variables, AnswerVariables):
            question = PromptInput(variables, lang, clock.evaluated_at)
            sources = number_sources(
                await self._passages(variables), self._sources_budget(spec, question), source_tokens
            )
            prompt = PromptInput(variables, lang, clock.evaluated_at, sources=sources)
            return Prepared(
                spec, prompt, scope, skip_model=None if sources else RunReason.NO_SOURCES
            )
        return Prepared(spec, PromptInput(variables, lang, clock.evaluated_at), scope)

    def _sources_budget(self, spec: AnySpec, question: PromptInput[Any]) -> int:
        """Tokens the sources may take: the configured budget, within what the prompt's
        ``max_input_tokens`` leaves once its rules, question and schema are counted."""
        fixed = prompt_tokens(spec.render(question), spec.request_schema)
        return max(
            0, min(self._settings.answer_context_token_budget, spec.max_input_tokens - fixed)
        )

    async def _passages(self, variables: AnswerVariables) -> list[Passage]:
        if variables.passages:
            return [
                Passage(p.document_id, p.chunk_index, p.title, p.text, p.score)
                for p in variables.passages
            ]
        hits = await self._context.search_knowledge(
            variables.question, self._settings.answer_search_limit
        )
        return [
            Passage(hit.node.node_id, 0, hit.node.title, hit.node.description, hit.score)
            for hit in relevant_hits(hits)
            if hit.node.description.strip()
        ]

    async def execute(self, prepared: Prepared, clock: Clock) -> RunResult:
        """Run the prepared prompt and build its run record."""
        spec, prompt = prepared.spec, prepared.prompt
        skip = self._skip_reason(prepared)
        provider = self._provider
        if skip is not None or provider is None:
            reason = skip or RunReason.BASELINE_PROVIDER
            return await self._baseline(
                prepared, clock, reason, Tally(), provider=BASELINE_PROVIDER
            )
        model = self._settings.model_for(spec.tier)
        rendered = spec.render(prompt)
        key = self._cache_key(prepared, provider.name, model, rendered)
        cached = self._cache.get(key) if key is not None else None
        if cached is not None:
            # No model is asked: the run record says where the output came from, and no GenAI
            # span claims a model call that did not happen.
            record = self._record(
                prepared, clock, RunPath(cached.path), cached.reason, Tally(), provider.name,
                model, cache_hit=True,
            )  # fmt: skip
            record.request_sha256 = cached.request_sha256
            return RunResult(cached.output, record)
        with prompt_span(spec, provider.name, model, "json") as span:
            with self._provider_limit.hold():
                outcome = await run_model(
                    spec,
                    prompt,
                    rendered,
                    provider,
                    model=model,
                    max_output_tokens=self._settings.output_tokens(spec.max_output_tokens),
                    max_attempts=self._settings.max_answer_attempts,
                    deadline=model_deadline(self._settings.fallback_reserve_seconds),
                )
            record_tally(
                span, outcome.tally, path=outcome.path, reason=outcome.reason,
                input_ref=prepared.input_ref,
            )  # fmt: skip
        return await self._finish(prepared, clock, outcome, provider.name, model, key)

    def _cache_key(
        self, prepared: Prepared, provider: str, model: str, rendered: tuple[ChatMessage, ...]
    ) -> CacheKey | None:
        """The run's cache key; None when the run may not be cached or the cache is off."""
        if not (prepared.cacheable and self._cache.enabled):
            return None
        spec = prepared.spec
        fixed = self._fixed_key_parts.get(spec.ref)
        if fixed is None:
            # What only the prompt and the settings decide is digested once per prompt.
            parameters = digest(
                {
                    "provider": provider,
                    "temperature": spec.temperature,
                    "max_output_tokens": self._settings.output_tokens(spec.max_output_tokens),
                    "max_attempts": self._settings.max_answer_attempts,
                    "llm_server": self._settings.llm_server,
                    "structured_output": self._settings.structured_output,
                }
            )
            fixed = self._fixed_key_parts[spec.ref] = (parameters, digest(spec.output_schema))
        return CacheKey(
            prompt_ref=spec.ref,
            model=model,
            parameters=fixed[0],
            schema_sha256=fixed[1],
            context_sha256=messages_digest(rendered),
            input_sha256=input_digest(prepared.prompt),
            scope=prepared.scope,
        )

    def _skip_reason(self, prepared: Prepared) -> RunReason | None:
        if not self._settings.ai_enrichment_enabled:
            return RunReason.KILL_SWITCH
        if self._provider is None:
            return RunReason.BASELINE_PROVIDER
        return prepared.skip_model

    async def _keep(self, spec: AnySpec, output: Any) -> None:
        """Store what the result puts in the item bank before anyone receives its ids; a cached
        result was stored when it was made."""
        if spec.bank_items is not None and (items := spec.bank_items(output)):
            await self._context.store_generated_items(items, spec.ref)

    async def _finish(
        self,
        prepared: Prepared,
        clock: Clock,
        outcome: Outcome,
        provider: str,
        model: str,
        key: CacheKey | None,
    ) -> RunResult:
        if outcome.accepted is None:
            logger.info(
                "prompt fell back to its baseline",
                extra={
                    "prompt": prepared.spec.ref,
                    "reason": outcome.reason,
                    "detail": outcome.detail,
                    "attempts": outcome.tally.requests,
                },
            )
            return await self._baseline(
                prepared, clock, outcome.reason, outcome.tally, provider, model
            )
        output = prepared.spec.finish(outcome.accepted, prepared.prompt)
        await self._keep(prepared.spec, output)
        if key is not None:
            self._cache.put(
                key,
                CachedRun(
                    output,
                    outcome.path.value,
                    outcome.reason,
                    outcome.tally.request_sha256,
                    outcome.tally.response_model,
                ),
            )
        record = self._record(
            prepared, clock, outcome.path, outcome.reason, outcome.tally, provider, model
        )
        return RunResult(output, record)

    async def _baseline(
        self,
        prepared: Prepared,
        clock: Clock,
        reason: str,
        tally: Tally,
        provider: str,
        model: str = "",
    ) -> RunResult:
        output = prepared.spec.baseline(prepared.prompt)
        await self._keep(prepared.spec, output)
        record = self._record(prepared, clock, RunPath.FALLBACK, reason, tally, provider, model)
        return RunResult(output, record)

    def _record(
        self,
        prepared: Prepared,
        clock: Clock,
        path: RunPath,
        reason: str,
        tally: Tally,
        provider: str,
        model: str,
        *,
        cache_hit: bool = False,
    ) -> run_pb2.RunRecord:
        run_path = to_proto(run_pb2.RunPath, "RUN_PATH_", path)
        return run_record(
            prepared.spec, clock, run_path, reason, tally, provider, model,
            input_ref=prepared.input_ref, cache_hit=cache_hit,
        )  # fmt: skip
