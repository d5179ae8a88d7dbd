"""`make soak`: the whole stack as processes under a realistic mix for a bounded time.

Starts embedded PostgreSQL in a temporary directory, migrates, seeds, registers the tools and
starts the three services (baseline model provider), then runs one closed-loop worker per
operation of :mod:`benchmarks.soak_mix` for ``NEMO_SOAK_SECONDS`` (default 120). Reports per
service the throughput, error count and p99 latency, and each process's resident memory at the
start, after the first minute and at the end. Exits 1 on any error or when a service's memory
grows by 10% or more between the first minute and the end.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from benchmarks.soak_mix import Clients, Operation, operations
from nemo_core.db import connect, dsn_with
from nemo_ops.embedded_pg import start_embedded_postgres
from nemo_ops.migrate import migrate
from nemo_ops.seed import seed
from tests.stack import Stack, start_stack

SERVICES = ("context", "gateway", "toolplane")
MAX_GROWTH = 0.10
FIRST_MINUTE_SECONDS = 60.0
#: The soak measures the services, not the per-agent limiter that protects them from one agent.
UNLIMITED_AGENTS = {
    "NEMO_TOOLPLANE_AGENT_CALLS_PER_SECOND": "100000",
    "NEMO_TOOLPLANE_AGENT_CALL_BURST": "100000",
    "NEMO_TOOLPLANE_USER_CALLS_PER_SECOND": "100000",
    "NEMO_TOOLPLANE_USER_CALL_BURST": "100000",
    "NEMO_TOOLPLANE_TOOL_CALL_LIMITS": "[]",
}


@dataclass
class ServiceTally:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_errors: list[str] = field(default_factory=list)


@dataclass
class Memory:
    start: dict[str, int] = field(default_factory=dict)
    first_minute: dict[str, int] = field(default_factory=dict)
    end: dict[str, int] = field(default_factory=dict)


def _rss(stack: Stack) -> dict[str, int]:
    return {name: psutil.Process(stack.services[name].pid).memory_info().rss for name in SERVICES}


async def _worker(operation: Operation, tally: ServiceTally, stop_at: float) -> None:
    while (started := time.monotonic()) < stop_at:
        try:
            await operation.call()
        except Exception as error:  # every failure counts, whatever its kind
            tally.errors += 1
            if len(tally.first_errors) < 5:
                tally.first_errors.append(f"{operation.name}: {error!r}"[:300])
            continue
        tally.latencies.append(time.monotonic() - started)


async def _sample_memory(stack: Stack, memory: Memory, at: float) -> None:
    await asyncio.sleep(at)
    memory.first_minute = _rss(stack)


async def soak(stack: Stack, seconds: float) -> tuple[dict[str, ServiceTally], Memory]:
    clients = Clients(stack)
    try:
        mix = operations(clients)
        for operation in mix:  # warm-up: lazy indexes, caches and connections exist before t0
            await operation.call()
        tallies: dict[str, ServiceTally] = defaultdict(ServiceTally)
        memory = Memory(start=_rss(stack))
        stop_at = time.monotonic() + seconds
        sampler = asyncio.create_task(
            _sample_memory(stack, memory, min(FIRST_MINUTE_SECONDS, seconds / 2))
        )
        await asyncio.gather(*(_worker(op, tallies[op.service], stop_at) for op in mix))
        await sampler
        memory.end = _rss(stack)
        return tallies, memory
    finally:
        await clients.close()


def report(tallies: dict[str, ServiceTally], memory: Memory, seconds: float) -> tuple[str, bool]:
    mib = 1024 * 1024
    lines = [
        f"soak: {seconds:.0f} s",
        f"{'service':<10} {'calls':>8} {'calls/s':>8} {'errors':>6} {'p99 ms':>8} "
        f"{'rss start':>10} {'rss 1 min':>10} {'rss end':>10} {'growth':>7}",
    ]
    healthy = True
    for name in SERVICES:
        tally = tallies[name]
        calls = len(tally.latencies)
        p99 = statistics.quantiles(tally.latencies, n=100)[98] * 1000 if calls > 1 else 0.0
        growth = (memory.end[name] - memory.first_minute[name]) / memory.first_minute[name]
        healthy = healthy and tally.errors == 0 and growth < MAX_GROWTH
        lines.append(
            f"{name:<10} {calls:8d} {calls / seconds:8.1f} {tally.errors:6d} {p99:8.1f} "
            f"{memory.start[name] / mib:9.1f}M {memory.first_minute[name] / mib:9.1f}M "
            f"{memory.end[name] / mib:9.1f}M {growth:7.1%}"
        )
        lines.extend(f"  error: {text}" for text in tally.first_errors)
    lines.append(
        "result: " + ("ok" if healthy else f"FAILED (errors, or growth >= {MAX_GROWTH:.0%})")
    )
    return "\n".join(lines), healthy


async def _prepare_database(server_dsn: str) -> str:
    conn = await connect(server_dsn)
    try:
        await conn.execute('CREATE DATABASE "nemo_soak"')
    finally:
        await conn.close()
    owner_dsn = dsn_with(server_dsn, database="nemo_soak")
    await migrate(owner_dsn)
    await seed(owner_dsn)
    return owner_dsn


async def main() -> int:
    seconds = float(os.environ.get("NEMO_SOAK_SECONDS", "120"))
    with tempfile.TemporaryDirectory(prefix="nemo-soak-") as scratch:
        state = Path(scratch)
        postgres = start_embedded_postgres(state / "pgdata")
        try:
            owner_dsn = await _prepare_database(postgres.dsn)
            stack = await start_stack(
                owner_dsn, state / "stack", extra_env={"toolplane": UNLIMITED_AGENTS}
            )
            try:
                print(f"soak: driving the stack for {seconds:.0f} s", file=sys.stderr, flush=True)
                tallies, memory = await soak(stack, seconds)
            finally:
                await stack.stop()
        finally:
            postgres.stop()
    text, healthy = report(tallies, memory, seconds)
    print(text)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
