"""Closed-loop load: N concurrent callers for a fixed time; latency percentiles, throughput, the
server process's CPU time per call (all of it, and its event-loop thread's), and how busy the
machine's cores were."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
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
    counted_cpu_ms_per_call: float | None = None
    """CPU of the other processes counted with the load (:attr:`Load.counted`), per call."""
    loop_cpu_ms_per_call: float | None = None
    """CPU of the server's main thread (its event loop) per call: one thread can use one core
    at most, so a server whose loop is near a core busy is bound by it."""
    loop_cores_busy: float | None = None
    """The server's main thread's CPU per second of the load, in cores."""
    machine_cores_busy: float | None = None
    """CPU of every process of the machine per second of the load, in cores."""

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


def _loop_cpu_seconds(process: psutil.Process | None) -> float:
    """CPU seconds of the main thread of ``process`` (its thread id is the process id)."""
    if process is None:
        return 0.0
    for thread in process.threads():
        if thread.id == process.pid:
            return float(thread.user_time + thread.system_time)
    return 0.0


def _machine_busy_seconds() -> float:
    times = psutil.cpu_times()
    return float(times.user + times.nice + times.system + times.irq + times.softirq)


def cpu_seconds(processes: Sequence[psutil.Process]) -> float:
    """CPU seconds of ``processes`` (one that has exited counts nothing)."""
    total = 0.0
    for process in processes:
        try:
            total += _cpu_seconds(process)
        except psutil.NoSuchProcess:
            continue
    return total


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
    segment = await _drive(Load(name, call, server), concurrency, seconds, warmup_seconds)
    return _result(name, [segment], server is not None)


@dataclass(frozen=True)
class Load:
    """One of the loads :func:`run_alternating` takes turns with."""

    name: str
    call: Callable[[], Awaitable[object]]
    server: psutil.Process | None = None
    counted: Callable[[], Sequence[psutil.Process]] | None = None
    """Other processes whose CPU is counted while this load runs, looked up at each turn (a
    database's backends come and go)."""


async def run_alternating(
    loads: list[Load], *, concurrency: int, seconds: float, rounds: int, warmup_seconds: float = 1.0
) -> list[LoadResult]:
    """Each load in turn for ``seconds / rounds``, ``rounds`` times over, after a warm-up of each.

    A shared machine's speed drifts over seconds; compared load by load in one stretch, two
    servers would be measured on different machines. Taking turns puts both through the same
    drift, so their ratio holds even when the absolute figures move.
    """
    for load in loads:
        await _drive(load, concurrency, 0.0, warmup_seconds)
    segments: list[list[_Segment]] = [[] for _ in loads]
    for _ in range(rounds):
        for load, taken in zip(loads, segments, strict=True):
            taken.append(await _drive(load, concurrency, seconds / rounds, 0.0))
    return [
        _result(load.name, taken, load.server is not None, counted=load.counted is not None)
        for load, taken in zip(loads, segments, strict=True)
    ]


@dataclass(frozen=True)
class _Segment:
    latencies: list[float]
    errors: int
    seconds: float
    cpu_seconds: float
    counted_cpu_seconds: float
    loop_cpu_seconds: float
    machine_busy_seconds: float


async def _drive(load: Load, concurrency: int, seconds: float, warmup_seconds: float) -> _Segment:
    call = load.call
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
    counted = load.counted() if load.counted is not None else ()
    cpu_before, counted_before = _cpu_seconds(load.server), cpu_seconds(counted)
    loop_before, machine_before = _loop_cpu_seconds(load.server), _machine_busy_seconds()
    started = time.monotonic()
    await asyncio.gather(*tasks)
    return _Segment(
        latencies,
        errors,
        time.monotonic() - started,
        _cpu_seconds(load.server) - cpu_before,
        cpu_seconds(counted) - counted_before,
        _loop_cpu_seconds(load.server) - loop_before,
        _machine_busy_seconds() - machine_before,
    )


def _per_call_ms(cpu_seconds: float, calls: int) -> float | None:
    return cpu_seconds * 1000 / calls if calls else None


def _result(
    name: str, segments: list[_Segment], has_server: bool, *, counted: bool = False
) -> LoadResult:
    latencies = [latency for segment in segments for latency in segment.latencies]
    calls = len(latencies)
    quantiles = statistics.quantiles(latencies, n=100) if calls > 1 else [0.0] * 99
    cpu_used = sum(segment.cpu_seconds for segment in segments)
    counted_used = sum(segment.counted_cpu_seconds for segment in segments)
    loop_used = sum(segment.loop_cpu_seconds for segment in segments)
    seconds = sum(segment.seconds for segment in segments)
    return LoadResult(
        name=name,
        calls=calls,
        errors=sum(segment.errors for segment in segments),
        seconds=seconds,
        p50_ms=quantiles[49] * 1000,
        p99_ms=quantiles[98] * 1000,
        server_cpu_ms_per_call=_per_call_ms(cpu_used, calls) if has_server else None,
        counted_cpu_ms_per_call=_per_call_ms(counted_used, calls) if counted else None,
        loop_cpu_ms_per_call=_per_call_ms(loop_used, calls) if has_server else None,
        loop_cores_busy=loop_used / seconds if has_server and seconds else None,
        machine_cores_busy=sum(segment.machine_busy_seconds for segment in segments) / seconds
        if seconds
        else None,
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
