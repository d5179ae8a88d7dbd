"""`make bench`: every benchmark, as ratios against the empty gRPC handler measured in the same run.

The gateway's streamed reply is measured against a direct stream from the same provider, and its
text checks by precision and recall on their labelled corpora. The context and gateway
benchmarks also measure a floor (rows named "floor: ..."): a server
through the same bootstrap that does only the work the service cannot avoid (the build's
database read; the gateway's model call), so the output shows how far each service is from the
least any implementation of it costs on this stack, not only from the empty handler.

The console's audit search is measured on one million generated audit rows, as a person pages
through it (p50 and p95 per kind of search, against the console's health page).

The shared limiter's cost per decision (one statement over a call's buckets) is measured against
the cheapest statement through the same pool, and the delay until an access change reaches two
listening replicas. The CPU figures the capacity model needs are written to a JSON file
(:mod:`benchmarks.figures`); the context service's is that of the build with an S3 snapshot to
an S3 API that keeps connections alive, as production writes them.

Environment: NEMO_BENCH_SECONDS (default 5) per measurement, NEMO_BENCH_CONCURRENCY (default 32).
"""

from __future__ import annotations

import asyncio
import os
import sys

from benchmarks.console import measure_console_search
from benchmarks.context import measure_build_context
from benchmarks.detectors import measure_detectors
from benchmarks.figures import write_figures
from benchmarks.gateway import measure_gateway
from benchmarks.gateway_stream import measure_streaming
from benchmarks.grpc_baseline import measure_empty_handler
from benchmarks.limiter import measure_limiter
from benchmarks.load import report
from benchmarks.toolplane import measure_toolplane


async def main() -> None:
    seconds = float(os.environ.get("NEMO_BENCH_SECONDS", "5"))
    concurrency = int(os.environ.get("NEMO_BENCH_CONCURRENCY", "32"))
    print(f"each measurement: {seconds:.0f} s at {concurrency} concurrent callers", file=sys.stderr)
    baseline = await measure_empty_handler("bare", concurrency=concurrency, seconds=seconds)
    results = [
        baseline,
        await measure_empty_handler("nemo", concurrency=concurrency, seconds=seconds),
    ]
    context = await measure_build_context(concurrency=concurrency, seconds=seconds)
    results += [context.floor, context.load, context.unpersisted, context.s3, context.keep_alive]
    gateway_results, gateway_summary = await measure_gateway(seconds)
    streaming = await measure_streaming(seconds)
    print(report([*results, *gateway_results], baseline))
    print(context.describe(baseline))
    print(gateway_summary)
    print(streaming)
    print(measure_detectors())
    print()
    toolplane, toolplane_figures = await measure_toolplane(concurrency=concurrency, seconds=seconds)
    print(toolplane)
    limiter = await measure_limiter(concurrency=concurrency, seconds=seconds)
    print()
    print(limiter.describe())
    figures = {
        **toolplane_figures,
        # Production writes snapshots to S3, which keeps connections alive: builds are sized
        # from that load.
        "context.build.service_cpu_ms": context.keep_alive.server_cpu_ms_per_call or 0.0,
        "context.build.postgres_cpu_ms": context.postgres_cpu_ms_per_build or 0.0,
        "gateway.prompt.service_cpu_ms": gateway_results[-1].server_cpu_ms_per_call or 0.0,
        "limiter.decision.service_cpu_ms": limiter.results[1].server_cpu_ms_per_call or 0.0,
        "limiter.decision.postgres_cpu_ms": limiter.postgres_cpu_ms[1],
        "access.invalidation.p99_ms": limiter.invalidation_p99_ms,
    }
    print(f"figures for the capacity model: {write_figures(figures)}", file=sys.stderr)
    print()
    print(await measure_console_search())


if __name__ == "__main__":
    asyncio.run(main())
