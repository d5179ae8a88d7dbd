"""`make bench`: every benchmark, as ratios against the empty gRPC handler measured in the same run.

Environment: NEMO_BENCH_SECONDS (default 5) per measurement, NEMO_BENCH_CONCURRENCY (default 32).
"""

from __future__ import annotations

import asyncio
import os
import sys

from benchmarks.grpc_baseline import measure_empty_handler
from benchmarks.load import report


async def main() -> None:
    seconds = float(os.environ.get("NEMO_BENCH_SECONDS", "5"))
    concurrency = int(os.environ.get("NEMO_BENCH_CONCURRENCY", "32"))
    print(f"each measurement: {seconds:.0f} s at {concurrency} concurrent callers", file=sys.stderr)
    baseline = await measure_empty_handler("bare", concurrency=concurrency, seconds=seconds)
    results = [
        baseline,
        await measure_empty_handler("nemo", concurrency=concurrency, seconds=seconds),
    ]
    print(report(results, baseline))


if __name__ == "__main__":
    asyncio.run(main())
