"""Closed-loop load: N concurrent callers for a fixed time; latency percentiles, throughput and
the server process's CPU time per call."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psutil

from nemo_testing.ports import wait_for_port


@dataclass(frozen=True)
class LoadResult:
    """What one load run measured."""

    name: str
    calls: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_cpu_ms_per_call: float | None

    @property
    def throughput(self) -> float:
        return self.calls / self.seconds


@contextmanager
def server_process(
    args: list[str], port: int, env: dict[str, str] | None = None
) -> Iterator[psutil.Process]:
    """Run a server in its own process (its own core, as far as two cores allow), with ``env``
    or this process's environment."""
    process = subprocess.Popen([sys.executable, *args], env=env or os.environ.copy())
    try:
        wait_for_port(port)
        yield psutil.Process(process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _cpu_seconds(process: psutil.Process | None) -> float:
    if process is None:
        return 0.0
    times = process.cpu_times()
    return float(times.user + times.system)


async def run_load(
    name: str,
    call: Callable[[], Awaitable[object]],
    *,
    concurrency: int,
    seconds: float,
    warmup_seconds: float = 1.0,
    server: psutil.Process | None = None,
) -> LoadResult:
    """Drive ``call`` from ``concurrency`` tasks for ``seconds`` after a warm-up."""
    latencies: list[float] = []
    errors = 0
    measuring = False
    stop_at = time.monotonic() + warmup_seconds + seconds

    async def caller() -> None:
        nonlocal errors
        while (now := time.monotonic()) < stop_at:
            try:
                await call()
            except Exception:
                errors += measuring
                continue
            if measuring:
                latencies.append(time.monotonic() - now)

    tasks = [asyncio.create_task(caller()) for _ in range(concurrency)]
    await asyncio.sleep(warmup_seconds)
    measuring = True
    cpu_before, started = _cpu_seconds(server), time.monotonic()
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - started
    cpu_used = _cpu_seconds(server) - cpu_before
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return LoadResult(
        name=name,
        calls=len(latencies),
        errors=errors,
        seconds=elapsed,
        p50_ms=quantiles[49] * 1000,
        p99_ms=quantiles[98] * 1000,
        server_cpu_ms_per_call=(cpu_used * 1000 / len(latencies)) if server and latencies else None,
    )


def report(results: list[LoadResult], baseline: LoadResult) -> str:
    """A table of results with throughput and CPU ratios against ``baseline``."""
    lines = [
        f"{'benchmark':<44} {'calls/s':>9} {'x base':>7} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'srv cpu ms':>10} {'x base':>7} {'errors':>6}",
    ]
    for result in results:
        cpu = result.server_cpu_ms_per_call
        base_cpu = baseline.server_cpu_ms_per_call
        cpu_text = f"{cpu:10.3f}" if cpu else f"{'-':>10}"
        cpu_ratio = f"{cpu / base_cpu:7.2f}" if cpu and base_cpu else f"{'-':>7}"
        lines.append(
            f"{result.name:<44} {result.throughput:9.0f} "
            f"{result.throughput / baseline.throughput:7.2f} {result.p50_ms:8.2f} "
            f"{result.p99_ms:8.2f} {cpu_text} {cpu_ratio} "
            f"{result.errors:6d}"
        )
    return "\n".join(lines)
