"""The shared limiter's cost per call, and how fast an access change reaches two replicas.

A tool call's limits are one statement, ``toolplane.take_tokens`` over the call's buckets (per
agent, per agent and user, per tool), through the tool plane's pool. Measured here against the
cheapest statement through the same pool (``SELECT 1``), from as many callers, on an embedded
PostgreSQL migrated for the run: throughput, latency, and the CPU milliseconds per call of the
caller (this process: asyncpg and the event loop) and of PostgreSQL (all its processes). Two
key distributions: calls spread over many agents and users, and every call on one agent (its
bucket row is the hot spot every replica locks in turn).

Invalidation: two access caches listen as two replicas do; each change to the rules (a token
revoked, a grant removed, a deny policy added, in turn) is timed from the start of its
statement (its commit included) until both caches have dropped their entries.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from benchmarks.context import postgres_processes
from benchmarks.load import LoadResult, cpu_seconds, report, run_load
from nemo_core.db import Pool, connect, create_pool, dsn_with
from nemo_ops.embedded_pg import start_embedded_postgres
from nemo_ops.migrate import migrate
from nemo_ops.seed import seed
from nemo_toolplane.limits.shared import Bucket, SharedBuckets, bucket_key
from nemo_toolplane.rules.cache import RulesCache
from nemo_toolplane.rules.store import RulesStore
from nemo_toolplane.tokens import issue_token

POOL_SIZE = 10
AGENTS = 200
USERS_PER_AGENT = 50
#: Generous limits: the benchmark measures deciding, not refusing.
RATE, BURST = 1e6, 1e6
INVALIDATIONS = 100


@dataclass(frozen=True)
class LimiterBenchmark:
    """The three loads, PostgreSQL's CPU per call of each, and the invalidation delays."""

    results: tuple[LoadResult, ...]
    postgres_cpu_ms: tuple[float, ...]
    invalidation_ms: tuple[float, ...]

    @property
    def take_client_cpu_ms(self) -> float:
        """Caller CPU per decision, spread keys, above the plain round trip."""
        return _extra(
            self.results[1].server_cpu_ms_per_call, self.results[0].server_cpu_ms_per_call
        )

    @property
    def take_postgres_cpu_ms(self) -> float:
        """PostgreSQL CPU per decision, spread keys, above the plain round trip."""
        return _extra(self.postgres_cpu_ms[1], self.postgres_cpu_ms[0])

    @property
    def invalidation_p99_ms(self) -> float:
        return _quantile(self.invalidation_ms, 99)

    def describe(self) -> str:
        lines = [report(list(self.results), self.results[0]), ""]
        for result, postgres in zip(self.results, self.postgres_cpu_ms, strict=True):
            lines.append(f"{result.name:<44} PostgreSQL cpu {postgres:.3f} ms/call")
        spread = self.results[1]
        lines.append(
            f"shared limiter cost per call (spread keys, above SELECT 1): caller "
            f"{self.take_client_cpu_ms:.3f} ms + PostgreSQL {self.take_postgres_cpu_ms:.3f} ms "
            f"CPU; whole decision caller {spread.server_cpu_ms_per_call or 0:.3f} ms + PostgreSQL "
            f"{self.postgres_cpu_ms[1]:.3f} ms, p50 {spread.p50_ms:.2f} ms"
        )
        delays = self.invalidation_ms
        lines.append(
            f"access change (statement and commit) seen by both of two listening replicas "
            f"({len(delays)} changes): "
            f"p50 {_quantile(delays, 50):.2f} ms, p99 {self.invalidation_p99_ms:.2f} ms, "
            f"max {max(delays):.2f} ms"
        )
        return "\n".join(lines)


def _extra(value: float | None, base: float | None) -> float:
    return max(0.0, (value or 0.0) - (base or 0.0))


def _quantile(values: tuple[float, ...], percent: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100)[percent - 1]


def _call_buckets(agent: int, user: int) -> list[Bucket]:
    """A call's three buckets: its agent, the agent and its user, and a tool limit."""
    return [
        Bucket(bucket_key("agent on *", f"agent-{agent}"), RATE, BURST),
        Bucket(bucket_key("agent+user on *", f"agent-{agent}", f"U-{user}"), RATE, BURST),
        Bucket(
            bucket_key("agent+tool on docs.*", f"agent-{agent}", "docs.search_docs"), RATE, BURST
        ),
    ]


async def _load(
    name: str,
    data_dir: Path,
    call: Callable[[], Awaitable[object]],
    *,
    concurrency: int,
    seconds: float,
) -> tuple[LoadResult, float]:
    """The load with this process as the measured caller, and PostgreSQL's CPU per call."""
    await run_load(name, call, concurrency=concurrency, seconds=1.0)
    postgres = postgres_processes(data_dir)
    before = cpu_seconds(postgres)
    result = await run_load(
        name, call, concurrency=concurrency, seconds=seconds, warmup_seconds=0,
        server=psutil.Process(),
    )  # fmt: skip
    used = cpu_seconds(postgres) - before
    return result, used * 1000 / max(1, result.calls)


#: The changes timed, in turn: a token revoked, a grant removed, a deny policy added (each then
#: undone by the next one of its kind, so the rules stay those of the seed).
_CHANGES = (
    "UPDATE toolplane.agent_tokens SET revoked_at = CASE WHEN revoked_at IS NULL THEN now() END "
    "WHERE id = (SELECT min(id) FROM toolplane.agent_tokens)",
    "WITH removed AS (DELETE FROM toolplane.grants WHERE id = (SELECT max(id) FROM "
    "toolplane.grants) RETURNING agent_id, tool_pattern, resource_scope, permission) "
    "INSERT INTO toolplane.grants (agent_id, tool_pattern, resource_scope, permission) "
    "SELECT * FROM removed",
    "WITH removed AS (DELETE FROM toolplane.policies WHERE name = 'bench-deny') "
    "INSERT INTO toolplane.policies (name, effect, agent_scope, tool_scope) "
    "SELECT 'bench-deny', 'deny', 'research-agent', 'docs.*' "
    "WHERE NOT EXISTS (SELECT FROM toolplane.policies WHERE name = 'bench-deny')",
)


async def _invalidation_delays(owner_dsn: str, toolplane_dsn: str, pool: Pool) -> list[float]:
    caches = [RulesCache(RulesStore(pool), toolplane_dsn) for _ in range(2)]
    stopping = asyncio.Event()
    listeners = [asyncio.create_task(cache.run(stopping)) for cache in caches]
    owner = await connect(owner_dsn)
    await issue_token(owner, "research-agent", label="bench")  # the token the changes revoke
    delays = []
    try:
        async with asyncio.timeout(30):
            while not all(cache.listening for cache in caches):  # noqa: ASYNC110  flags, no events
                await asyncio.sleep(0.01)
        for n in range(INVALIDATIONS):
            before = [cache.generation for cache in caches]
            # From the statement's start: the notification can arrive before the commit's own
            # answer does, so this is an upper bound (it includes the statement).
            sent = time.perf_counter()
            await owner.execute(_CHANGES[n % len(_CHANGES)])
            async with asyncio.timeout(10):
                # A busy wait: the delay is what is measured, and the caches only keep counters.
                while any(c.generation == b for c, b in zip(caches, before, strict=True)):  # noqa: ASYNC110
                    await asyncio.sleep(0)
            delays.append((time.perf_counter() - sent) * 1000)
    finally:
        stopping.set()
        await asyncio.gather(*listeners)
        await owner.close()
    return delays


async def measure_limiter(*, concurrency: int, seconds: float) -> LimiterBenchmark:
    """The round-trip baseline, the limiter on spread and on one hot key, and invalidation."""
    with tempfile.TemporaryDirectory(prefix="nemo-bench-limiter-") as scratch:
        server = start_embedded_postgres(Path(scratch) / "pgdata", cleanup="delete")
        try:
            conn = await connect(server.dsn)
            try:
                await conn.execute("CREATE DATABASE nemo_bench")
            finally:
                await conn.close()
            owner = dsn_with(server.dsn, database="nemo_bench")
            await migrate(owner, role_passwords={})
            await seed(owner)
            toolplane = dsn_with(owner, user="nemo_toolplane")
            pool = await create_pool(toolplane, max_size=POOL_SIZE)
            try:
                buckets = SharedBuckets(pool, timeout=5)
                rng = random.Random(7)  # noqa: S311  which keys to load, not a secret

                async def round_trip() -> object:
                    return await pool.fetchval("SELECT 1")

                async def spread() -> object:
                    agent, user = rng.randrange(AGENTS), rng.randrange(USERS_PER_AGENT)
                    return await buckets.take(_call_buckets(agent, agent * 1000 + user))

                async def hot() -> object:
                    return await buckets.take(_call_buckets(0, rng.randrange(USERS_PER_AGENT)))

                measured = [
                    await _load(name, server.data_dir, call,
                                concurrency=concurrency, seconds=seconds)
                    for name, call in (
                        (f"SELECT 1 through the pool, {concurrency} callers", round_trip),
                        (f"limits, 3 buckets, spread keys, {concurrency} callers", spread),
                        (f"limits, 3 buckets, one agent, {concurrency} callers", hot),
                    )
                ]  # fmt: skip
                delays = await _invalidation_delays(owner, toolplane, pool)
            finally:
                await pool.close()
        finally:
            server.stop()
    return LimiterBenchmark(
        results=tuple(result for result, _ in measured),
        postgres_cpu_ms=tuple(postgres for _, postgres in measured),
        invalidation_ms=tuple(delays),
    )


async def main() -> None:
    print((await measure_limiter(concurrency=32, seconds=5)).describe())


if __name__ == "__main__":
    asyncio.run(main())
