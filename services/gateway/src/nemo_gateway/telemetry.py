"""GenAI spans (OpenTelemetry semantic conventions for generative AI client spans).

One span per prompt run, named ``{gen_ai.operation.name} {gen_ai.request.model}`` ("chat" alone
when no model was asked), with the request, response and usage attributes, the prompt's name and
version, and the context snapshot reference. Prompt and completion text are never recorded:
the snapshot reference points at what the model saw, for those allowed to read it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

OPERATION = "chat"

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
        yield span


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
    cache_hit: bool,
) -> None:
    """Response, usage and run attributes; never any prompt or completion text. A token count
    that is unknown (or, for a cache hit, was not spent) is left off rather than set to 0."""
    if input_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    if output_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    span.set_attributes(
        {
            "nemo.run.path": path,
            "nemo.run.reason": reason,
            "nemo.run.attempts": attempts,
            "nemo.run.cache_hit": cache_hit,
            "nemo.input_ref": input_ref,
        }
    )
    if response_model:
        span.set_attribute("gen_ai.response.model", response_model)
    if finish_reasons:
        span.set_attribute("gen_ai.response.finish_reasons", list(finish_reasons))
