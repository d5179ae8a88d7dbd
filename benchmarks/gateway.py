"""The gateway's added latency and CPU per call.

RunPrompt (coral.evaluate_item, cache off, so every call runs the whole pipeline) goes through a
gateway process to a provider process that answers at once; the same model call made directly
with the gateway's provider client is subtracted. Reported at 1 and 16 concurrent callers with
the gateway process's CPU milliseconds per call, next to an empty gRPC round trip through the
same server bootstrap, measured in the same run.

Goals: added p50 at 16 callers at most 1.5x the empty round trip; under 1 ms gateway CPU per call,
and at most 1.2x the floor's CPU per call (below).
Like the empty-handler baseline, the gateway process runs without an OpenTelemetry SDK installed,
so both sides pay the same for tracing.

The goal compares the gateway with a round trip that makes no model call, yet the gateway's
server must make one, and on this machine doing so in a server process already costs more than
the goal allows. So the same run also measures a floor: a pass-through server through the same
bootstrap whose handler only makes that model call with the same client
(``benchmarks.floor_servers model-call``). Its added p50 is the least any gateway could add here;
the summary gives it against the empty round trip, and the gateway's added p50 against it.

``python -m benchmarks.gateway serve PORT PROVIDER_URL`` runs the gateway process itself.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

import grpc.aio
from google.protobuf import struct_pb2

from benchmarks.context import CALLER_TOKEN as CONTEXT_TOKEN
from benchmarks.grpc_baseline import measure_empty_call, measure_empty_handler
from benchmarks.load import LoadResult, run_load, server_process
from nemo_core import event_loop
from nemo_core.server import Server, serve
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_gateway.app import SERVICE_NAME, build
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.registry import REGISTRY
from nemo_gateway.prompts.spec import PromptInput
from nemo_gateway.providers.base import ModelRequest
from nemo_gateway.providers.factory import build_provider
from nemo_gateway.settings import GatewaySettings
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc as pb_grpc
from nemo_protos.gateway.v1 import run_pb2
from nemo_testing.ports import free_port

CALLER_TOKEN = "bench-internal-token-0123456789"
PROMPT = "coral.evaluate_item"
ITEM: dict[str, Any] = {
    "stem": "Khai triển (x + 3)².",
    "kind": "multiple_choice",
    "choices": ["x² + 9", "x² + 6x + 9", "x² + 3x + 9", "2x + 6"],
    "answer_key": "x² + 6x + 9",
    "subject": "math",
    "grade": 8,
}
ANSWER = json.dumps(
    {"verdict": "accept", "issues": [], "summary": "Câu hỏi rõ ràng, đáp án duy nhất."},
    ensure_ascii=False,
)
CONCURRENCIES = (1, 16)
#: The gateway's CPU per call over its floor's (the model call alone) that the gateway aims at.
CPU_GOAL = 1.2
EVALUATED_AT = datetime(2026, 11, 24, 8, tzinfo=UTC)


def gateway_settings(
    port: int, provider_url: str, context_address: str | None = None
) -> GatewaySettings:
    """The benchmark gateway's settings: its own port, the given provider, cache off; the context
    service at ``context_address`` when given."""
    context: dict[str, Any] = (
        {"context_address": context_address, "client_token": CONTEXT_TOKEN}
        if context_address
        else {}
    )
    return GatewaySettings(
        listen_address=f"127.0.0.1:{port}",
        caller_tokens={"internal": CALLER_TOKEN},
        provider="openai",
        llm_base_url=provider_url,
        cache_max_entries=0,
        log_level="WARNING",
        **context,
    )


async def _serve_gateway(port: int, provider_url: str, context_address: str | None) -> None:
    settings = gateway_settings(port, provider_url, context_address)
    await serve(Server(SERVICE_NAME, settings, await build(settings)))


def model_request(settings: GatewaySettings) -> ModelRequest:
    """The model call the gateway makes for RunPrompt(PROMPT, ITEM)."""
    spec = REGISTRY.get(PROMPT)
    assert spec is not None
    prompt = PromptInput(spec.variables.model_validate(ITEM), Lang.VI, EVALUATED_AT)
    return ModelRequest(
        model=settings.model_for(spec.tier),
        messages=spec.render(prompt),
        max_output_tokens=spec.max_output_tokens,
        temperature=spec.temperature,
        output_schema=spec.request_schema,
    )


async def _direct(provider_url: str, concurrency: int, seconds: float) -> LoadResult:
    """The model call alone, made with the gateway's own provider client."""
    settings = gateway_settings(0, provider_url)
    provider = build_provider(settings)
    assert provider is not None
    request = model_request(settings)
    try:
        return await run_load(
            f"direct model call, {concurrency} callers",
            lambda: provider.complete(request, None),
            concurrency=concurrency,
            seconds=seconds,
        )
    finally:
        await provider.aclose()


async def _through_gateway(provider_url: str, concurrency: int, seconds: float) -> LoadResult:
    port = free_port()
    args = ["-m", "benchmarks.gateway", "serve", str(port), provider_url]
    with server_process(args, port) as gateway:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.GatewayServiceStub(channel)
            variables = struct_pb2.Struct()
            variables.update(ITEM)
            request = pb.RunPromptRequest(prompt_id=PROMPT, variables=variables)
            metadata = ((DEFAULT_CALLER_TOKEN_METADATA_KEY, CALLER_TOKEN),)

            async def call() -> None:
                response = await stub.RunPrompt(request, metadata=metadata, timeout=5)
                if response.run.path != run_pb2.RUN_PATH_MODEL:  # a fallback measures nothing
                    raise RuntimeError(f"unexpected run: {response.run.reason}")

            return await run_load(
                f"gateway RunPrompt, {concurrency} callers",
                call,
                concurrency=concurrency,
                seconds=seconds,
                server=gateway,
            )


def _ratio(value: float, floor: float) -> str:
    # A floor that adds nothing (or, within noise, less) gives no meaningful ratio.
    return f"{value / floor:4.2f}x" if floor > 0 else "   -"


async def _floor(provider_url: str, concurrency: int, seconds: float) -> LoadResult:
    """The model call alone, made by a pass-through server through the same bootstrap."""
    return await measure_empty_call(
        f"floor: model call pass-through, {concurrency} callers",
        "benchmarks.floor_servers",
        "model-call",
        [provider_url],
        concurrency=concurrency,
        seconds=seconds,
    )


async def measure_gateway(seconds: float) -> tuple[list[LoadResult], str]:
    """Every measurement, and the added-latency summary against the goals and the floor."""
    provider_port = free_port()
    provider_url = f"http://127.0.0.1:{provider_port}/v1"
    results: list[LoadResult] = []
    lines = ["gateway added latency (gateway p - direct p), floor = model call pass-through:"]
    with server_process(
        ["-m", "nemo_testing.providers", str(provider_port), ANSWER], provider_port
    ):
        for concurrency in CONCURRENCIES:
            empty = await measure_empty_handler("nemo", concurrency=concurrency, seconds=seconds)
            direct = await _direct(provider_url, concurrency, seconds)
            floor = await _floor(provider_url, concurrency, seconds)
            gateway = await _through_gateway(provider_url, concurrency, seconds)
            results += [empty, direct, floor, gateway]
            added_p50 = gateway.p50_ms - direct.p50_ms
            added_p99 = gateway.p99_ms - direct.p99_ms
            floor_p50 = floor.p50_ms - direct.p50_ms
            cpu = gateway.server_cpu_ms_per_call or 0.0
            floor_cpu = floor.server_cpu_ms_per_call or 0.0
            lines.append(
                f"  {concurrency:>2} callers: added p50 {added_p50:6.2f} ms,"
                f" p99 {added_p99:6.2f} ms; empty round trip p50 {empty.p50_ms:5.2f} ms"
                f" (added/empty {added_p50 / empty.p50_ms:4.2f}x);"
                f" gateway cpu {cpu:5.2f} ms/call"
            )
            lines.append(
                f"  {concurrency:>2} callers: floor added p50 {floor_p50:6.2f} ms"
                f" (floor/empty {floor_p50 / empty.p50_ms:4.2f}x,"
                f" gateway/floor {_ratio(added_p50, floor_p50)});"
                f" floor cpu {floor_cpu:5.2f} ms/call"
                f" (gateway cpu/floor cpu {_ratio(cpu, floor_cpu)})"
            )
            if concurrency == 16:
                lines.append(
                    f"  goals: added p50 <= 1.5x empty: {added_p50 <= 1.5 * empty.p50_ms};"
                    f" cpu < 1 ms/call: {cpu < 1.0};"
                    f" the floor itself within 1.5x empty: {floor_p50 <= 1.5 * empty.p50_ms};"
                    f" gateway cpu <= {CPU_GOAL}x the floor's: {cpu <= CPU_GOAL * floor_cpu}"
                )
    return results, "\n".join(lines)


def main() -> None:
    """``serve PORT PROVIDER_URL [CONTEXT_ADDRESS]``: run the benchmark's gateway process."""
    port, provider_url = sys.argv[2:4]
    context_address = sys.argv[4] if len(sys.argv) > 4 else None
    event_loop.run(_serve_gateway(int(port), provider_url, context_address))


if __name__ == "__main__":
    main()
