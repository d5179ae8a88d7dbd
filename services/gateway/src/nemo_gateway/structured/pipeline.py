"""One prompt run against a model, in the order the gateway guarantees:

truncation check → JSON extraction (strict, then brace slice, then backslash repair) → LaTeX
escape and control character check → pydantic validation → the prompt's check → guardrail.

- A prompt whose estimate (:func:`nemo_gateway.budget.prompt_tokens`) exceeds the prompt's
  ``max_input_tokens`` is never sent: FALLBACK with INPUT_TOO_LONG, or REASK_TOO_LONG when it is
  a re-ask that would carry it past the limit.
- A truncated answer (finish reason ``length`` / ``max_tokens``) is its own outcome: FALLBACK with
  reason TRUNCATED, not a parse error to re-ask.
- A parse or validation failure, an answer in another language than the prompt's
  (WRONG_LANGUAGE), or a problem the prompt's check finds (an uncited sentence), is re-asked with
  the error, up to the attempt limit and inside the deadline; then FALLBACK with
  the last problem's reason (ATTEMPTS_EXHAUSTED for parse and validation errors).
- A guardrail rejection goes straight to the whole baseline: never re-asked, never patched. A
  guardrail that raises has not accepted the answer either: FALLBACK with GUARDRAIL_ERROR.
- Provider failures (timeout, 429/5xx after retries, refusals) fall back with their own reason.

The outcome says which path produced the result: MODEL (first answer, strict parse), REPAIRED
(brace slice, backslash repair or a re-ask was needed) or FALLBACK.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from nemo_gateway.budget import prompt_tokens
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.spec import Problem, PromptInput, PromptSpec
from nemo_gateway.providers.base import (
    ChatMessage,
    ModelProvider,
    ModelRequest,
    ProviderFailure,
    Usage,
)
from nemo_gateway.reasons import RunPath, RunReason
from nemo_gateway.structured.extraction import ParseFailure, Step, TopLevel, extract_json
from nemo_gateway.structured.language import wrong_language
from nemo_gateway.structured.latex import ambiguous_latex, control_characters

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Tally:
    """What the provider requests of one run added up to."""

    requests: int = 0
    input_tokens: int | None = 0
    """None once any request's prompt tokens went unreported: the total is unknown."""
    output_tokens: int | None = 0
    request_sha256: str = ""
    response_model: str = ""
    finish_reasons: list[str] = field(default_factory=list)

    def add_usage(self, usage: Usage) -> None:
        self.input_tokens = _plus(self.input_tokens, usage.input_tokens)
        self.output_tokens = _plus(self.output_tokens, usage.output_tokens)

    def add_failure(self, failure: ProviderFailure) -> None:
        """A request that produced no answer: whatever it consumed went unreported."""
        self.requests += failure.requests
        self.request_sha256 = failure.request_sha256 or self.request_sha256
        if failure.requests:
            self.add_usage(Usage())


def _plus(total: int | None, count: int | None) -> int | None:
    return None if total is None or count is None else total + count


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of a run: an accepted model output, or None for the baseline."""

    accepted: Any | None
    path: RunPath
    reason: str
    tally: Tally
    detail: str = ""
    """Why the last answer was not accepted, for the log (never model text)."""


def _validation_text(error: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(part) for part in item['loc']) or '(root)'}: {item['msg']}"
        for item in error.errors(include_url=False, include_input=False)
    ]
    return "; ".join(problems[:10])


def reask_message(problem: str, schema: dict[str, Any]) -> ChatMessage:
    """What the model is told after an answer that could not be used."""
    return ChatMessage(
        "user",
        "Your previous answer could not be used: "
        f"{problem}. Answer again with only one JSON value that follows this JSON Schema "
        "exactly, with no other field, and write every backslash inside a string as \\\\:\n"
        + json.dumps(schema, ensure_ascii=False),
    )


def _check_answer(spec: PromptSpec[Any, Any, Any], text: str) -> tuple[Any, Step]:
    """Parse and validate one answer; raises ParseFailure or ValidationError."""
    top: TopLevel = "array" if spec.output_schema.get("type") == "array" else "object"
    parsed = extract_json(text, top)
    commands = ambiguous_latex(parsed.source)
    if commands:
        raise ParseFailure(
            f"LaTeX commands written with one backslash ({', '.join(commands)}) read as "
            "JSON control characters; double every backslash"
        )
    controls = control_characters(parsed.value)
    if controls:
        raise ParseFailure(
            f"the text holds control characters ({', '.join(controls)}); write no control "
            "character, and every backslash as \\\\"
        )
    # Strict: "yes" is not true and "8" is not 8; the model must write the type the schema asks.
    return spec.model_output.model_validate_json(parsed.source, strict=True), parsed.step


async def run_model(
    spec: PromptSpec[Any, Any, Any],
    prompt: PromptInput[Any],
    rendered: tuple[ChatMessage, ...],
    provider: ModelProvider,
    *,
    model: str,
    max_output_tokens: int,
    max_attempts: int,
    deadline: float | None,
) -> Outcome:
    """Ask the model with the ``rendered`` prompt until an answer is accepted, rejected or the
    attempts run out."""
    messages = list(rendered)
    tally = Tally()
    reasked = False
    problem = ""
    exhausted: str = RunReason.ATTEMPTS_EXHAUSTED
    for _ in range(max_attempts):
        if prompt_tokens(messages, spec.request_schema) > spec.max_input_tokens:
            # Never sent: a re-ask that would carry the prompt past its limit ends the run too.
            detail = f"the prompt would exceed {spec.max_input_tokens} input tokens"
            too_long = RunReason.REASK_TOO_LONG if reasked else RunReason.INPUT_TOO_LONG
            return Outcome(None, RunPath.FALLBACK, too_long, tally, detail)
        request = ModelRequest(
            model=model,
            messages=tuple(messages),
            max_output_tokens=max_output_tokens,
            temperature=spec.temperature,
            output_schema=spec.request_schema,
            reasoning=spec.reasoning,
        )
        try:
            completion = await provider.complete(request, deadline)
        except ProviderFailure as failure:
            tally.add_failure(failure)
            return Outcome(None, RunPath.FALLBACK, failure.code, tally, str(failure))
        tally.requests += completion.requests
        tally.request_sha256 = completion.request_sha256
        tally.response_model = completion.response_model
        tally.finish_reasons.append(completion.finish_reason)
        tally.add_usage(completion.usage)
        if completion.truncated:
            return Outcome(None, RunPath.FALLBACK, RunReason.TRUNCATED, tally)
        exhausted = RunReason.ATTEMPTS_EXHAUSTED
        try:
            value, step = _check_answer(spec, completion.text)
        except ParseFailure as failure:
            problem = str(failure)
        except ValidationError as error:
            problem = _validation_text(error)
        else:
            try:
                fixable = _fixable(spec, prompt, value)
            except Exception:
                logger.error("prompt check raised", extra={"prompt": spec.ref}, exc_info=True)
                detail = "the prompt's check raised"
                return Outcome(None, RunPath.FALLBACK, RunReason.GUARDRAIL_ERROR, tally, detail)
            if fixable is not None:
                problem, exhausted = fixable.text, fixable.reason
            else:
                return _judged(spec, prompt, value, step, tally, reasked=reasked)
        reasked = True
        messages += [
            ChatMessage("assistant", completion.text),
            reask_message(problem, spec.output_schema),
        ]
    return Outcome(None, RunPath.FALLBACK, exhausted, tally, problem)


LANGUAGE_NAMES: dict[Lang, str] = {Lang.VI: "Vietnamese", Lang.EN: "English"}


def _fixable(
    spec: PromptSpec[Any, Any, Any], prompt: PromptInput[Any], value: Any
) -> Problem | None:
    """What the model can still fix in a valid answer: a language other than the prompt's
    (:mod:`.language`), then what the prompt's own check finds."""
    other = wrong_language(value, prompt.lang) if spec.declares_language else None
    if other is not None:
        return Problem(
            RunReason.WRONG_LANGUAGE,
            f"the answer is written in {LANGUAGE_NAMES[other]}; write every text in "
            f"{LANGUAGE_NAMES[prompt.lang]}",
        )
    return spec.check(value, prompt)


def _judged(
    spec: PromptSpec[Any, Any, Any],
    prompt: PromptInput[Any],
    value: Any,
    step: Step,
    tally: Tally,
    *,
    reasked: bool,
) -> Outcome:
    """The outcome of an answer that parsed, validated and passed the prompt's check: the
    guardrail accepts or rejects it."""
    try:
        rejection = spec.guardrail(value, prompt)
    except Exception:
        # Model output must never turn into INTERNAL: a guardrail that cannot decide fails
        # closed, to the baseline.
        logger.error("guardrail raised", extra={"prompt": spec.ref}, exc_info=True)
        return Outcome(
            None, RunPath.FALLBACK, RunReason.GUARDRAIL_ERROR, tally, "the guardrail raised"
        )
    if rejection is not None:
        return Outcome(None, RunPath.FALLBACK, RunReason.GUARDRAIL_REJECTED, tally, rejection)
    if reasked:
        return Outcome(value, RunPath.REPAIRED, RunReason.REASKED, tally)
    if step is Step.STRICT:
        return Outcome(value, RunPath.MODEL, "", tally)
    return Outcome(value, RunPath.REPAIRED, step.value, tally)
