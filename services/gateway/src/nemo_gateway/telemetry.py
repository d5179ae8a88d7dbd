"""GenAI spans (OpenTelemetry semantic conventions for generative AI client spans).

One span per prompt run that asks a model, named ``{gen_ai.operation.name}
{gen_ai.request.model}`` ("chat" alone when no model was asked), with the request, response and
usage attributes, the prompt's name and version, and the context snapshot reference. A result
served from the cache asked no model and has no such span. A run that produced no accepted
answer (a provider failure, a truncated or rejected answer, attempts run out, a reply cut off)
sets ``error.type`` to its reason and the span status to ERROR, as does an error raised inside
the span. Prompt and completion text are never recorded: the snapshot reference points at what
the model saw, for those allowed to read it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from nemo_core.errors import ServiceError

OPERATION = "chat"
_ANSWERED = frozenset({"MODEL", "REPAIRED"})

_tracer = trace.get_tracer("nemo_gateway")


@contextmanager
def genai_span(
    *,
    provider: str,
    model: str,
    prompt_id: str,
    prompt_version: str,
    temperature: float,
    max_tokens: int,
    output_type: str,
) -> Iterator[Span]:
    """The span of one prompt run; request attributes are set here, the rest by
    :func:`record_result`."""
    name = f"{OPERATION} {model}" if model else OPERATION
    attributes: dict[str, str | int | float] = {
        "gen_ai.operation.name": OPERATION,
        "gen_ai.provider.name": provider,
        "gen_ai.prompt.name": prompt_id,
        "nemo.prompt.version": prompt_version,
        "gen_ai.output.type": output_type,
        "gen_ai.request.temperature": temperature,
        "gen_ai.request.max_tokens": max_tokens,
    }
    if model:
        attributes["gen_ai.request.model"] = model
    with _tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=attributes) as span:
        try:
            yield span
        except Exception as exc:
            reason = exc.reason if isinstance(exc, ServiceError) else type(exc).__qualname__
            mark_failed(span, str(reason))
            raise


def mark_failed(span: Span, reason: str) -> None:
    """``error.type`` and an ERROR status: the run produced no accepted answer."""
    span.set_attribute("error.type", reason)
    span.set_status(Status(StatusCode.ERROR, reason))


def record_result(
    span: Span,
    *,
    path: str,
    reason: str,
    attempts: int,
    input_tokens: int | None,
    output_tokens: int | None,
    response_model: str,
    finish_reasons: Sequence[str],
    input_ref: str,
) -> None:
    """Response, usage and run attributes; never any prompt or completion text. A token count
    that is unknown is left off rather than set to 0. A path other than MODEL or REPAIRED marks
    the span failed with the reason."""
    if input_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    if output_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    span.set_attributes(
        {
            "nemo.run.path": path,
            "nemo.run.reason": reason,
            "nemo.run.attempts": attempts,
            "nemo.input_ref": input_ref,
        }
    )
    if path not in _ANSWERED:
        mark_failed(span, reason or path)
    if response_model:
        span.set_attribute("gen_ai.response.model", response_model)
    if finish_reasons:
        span.set_attribute("gen_ai.response.finish_reasons", list(finish_reasons))
