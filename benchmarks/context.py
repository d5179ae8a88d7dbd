"""BuildContext(tutor_hint) with snapshots to a local directory, against a context service process.

The service runs as in production (``python -m nemo_context``) on a fresh embedded PostgreSQL
database, migrated and seeded; every call builds L-2041-1's tutor_hint bundle and persists its
snapshot. Besides throughput and latency, it reports the CPU milliseconds per build spent by the
context service process and by PostgreSQL (all its processes: backends and background workers).

A build cannot be cheaper than its database read, so the same run measures a floor on the same
database, from as many callers over one grpc.aio channel: a server through the same bootstrap
whose handler only makes the build's read (``benchmarks.floor_servers learner-read``: the
service's repository, purpose and pool size). Goal: BuildContext at least 0.8x the floor's
throughput, with the identifier gate, rendering and the snapshot. A third load, the same build
without its snapshot (``persist`` unset), tells the snapshot's share of the cost from the rest
of the build's. Two more, services writing their snapshots to a real S3 API as production does,
give the cost of that backend: one to the moto server on loopback, which closes every connection
(so it is an upper bound), one to the same server behind a front that keeps connections alive,
as S3 does (``nemo_testing.s3_front``). The identifier gate's own CPU per build, before and after
it learned the child's circle, is measured apart (``benchmarks.gate_cost``) and reported as a
share of the build. The loads take turns, so
a shared machine's drift in speed falls on all of them; the report also gives the floor's service
CPU per call against the build's.

Every snapshot is sealed under its learner's data key. What that costs a build is measured in
the same run on the very bundle the service returns: the learner's subject digest (which finds
the cached key) and the AES-GCM seal of the snapshot's canonical JSON, in CPU time, as a share
of the build's service CPU.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc.aio
import psutil

from benchmarks.gate_cost import GateCost, measure_gate
from benchmarks.grpc_baseline import empty_call
from benchmarks.load import Load, LoadResult, run_alternating, server_process
from nemo_context.snapshots.keys import MasterKey, seal
from nemo_context.snapshots.store import canonical_json
from nemo_core.db import connect, dsn_with
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_ops.embedded_pg import start_embedded_postgres
from nemo_ops.migrate import migrate
from nemo_ops.seed import seed
from nemo_protos.context.v1 import context_service_pb2, context_service_pb2_grpc
from nemo_testing.ports import free_port
from nemo_testing.s3 import (
    context_snapshot_environment,
    create_bucket,
    keep_alive_s3_server,
    moto_s3_server,
)

CALLER_TOKEN = "bench-gateway-token-0123456789abcdef"
SNAPSHOT_BUCKET = "nemo-bench-snapshots"
WARMUP_SECONDS = 1.0
ROUNDS = 5
"""Turns each load takes: enough that a drift of the machine's speed falls on every load."""
GOAL = 0.8
"""BuildContext's throughput against its floor's that the build aims at."""
S3_GOAL_LOCAL = 1.25
"""The service CPU of a build with an S3 snapshot at most this times a local snapshot's."""
S3_GOAL_FLOOR = 2.0
"""The service CPU of a build with an S3 snapshot at most this times the floor's."""


@dataclass(frozen=True)
class ContextBenchmark:
    """The load result, PostgreSQL's share of the work, the floor, and the same build without
    its snapshot and with an S3 one."""

    load: LoadResult
    postgres_cpu_ms_per_build: float | None
    floor: LoadResult
    """The build's database read alone, served through the same bootstrap."""
    unpersisted: LoadResult
    """The same build with ``persist`` unset: no snapshot is written."""
    s3: LoadResult
    """The same build with its snapshot written to an S3 API, as in production: moto, which
    closes every connection (an upper bound)."""
    keep_alive: LoadResult
    """The same build with its snapshot written to the same S3 API behind a front that keeps
    connections alive, as S3 does."""
    gate: GateCost
    """The identifier gate's CPU per build, before and after the circle (in this process)."""
    sealing_ms: float
    """CPU milliseconds to find the learner's key (subject digest) and seal its snapshot."""
    sealed_bytes: int
    """Size of the snapshot sealed."""

    def describe(self, bare: LoadResult) -> str:
        """The CPU milliseconds per build of the service and of PostgreSQL; the floor's
        throughput against the ``bare`` empty handler, and the build's against the floor."""

        def figure(value: float | None) -> str:
            return f"{value:.3f}" if value is not None else "-"

        return (
            "BuildContext(tutor_hint) CPU ms per build: context service "
            f"{figure(self.load.server_cpu_ms_per_call)}, "
            f"PostgreSQL {figure(self.postgres_cpu_ms_per_build)}\n"
            f"floor (the build's learner read alone): {self.floor.throughput:.0f} calls/s, "
            f"{self.floor.throughput / bare.throughput:.2f}x the bare empty handler; "
            f"BuildContext {self.load.throughput / self.floor.throughput:.2f}x the floor "
            f"(goal {GOAL}x); service CPU per call, floor / build: {self._cpu_ratio()}\n"
            f"without its snapshot: {self.unpersisted.throughput / self.floor.throughput:.2f}x "
            f"the floor, service CPU {figure(self.unpersisted.server_cpu_ms_per_call)} ms per "
            f"build; the snapshot costs the service {self._snapshot_cpu(self.load)} ms per build\n"
            f"{self._s3_builds()}\n"
            f"{self._sealing()}\n"
            f"{self._loops()}\n"
            # Against the build without its snapshot: the gate's share of building the bundle.
            f"{self.gate.describe(self.unpersisted.server_cpu_ms_per_call)}"
        )

    def _s3_builds(self) -> str:
        """The S3 builds' service CPU, and against the local build's and the floor's."""
        local, floor = self.load.server_cpu_ms_per_call, self.floor.server_cpu_ms_per_call
        lines = []
        for label, s3 in (
            ("moto, which closes every connection (upper bound)", self.s3),
            ("S3 API that keeps connections alive, as S3 does", self.keep_alive),
        ):
            cpu = s3.server_cpu_ms_per_call
            ratios = (
                f"{cpu / local:.2f}x the local build (goal at most {S3_GOAL_LOCAL}x), "
                f"{cpu / floor:.2f}x the floor (goal at most {S3_GOAL_FLOOR}x)"
                if cpu and local and floor
                else "-"
            )
            lines.append(
                f"with an S3 snapshot to {label}: service CPU {cpu or 0:.3f} ms per build, the "
                f"snapshot {self._snapshot_cpu(s3)} ms; {ratios}"
            )
        return "\n".join(lines)

    def _sealing(self) -> str:
        build = self.load.server_cpu_ms_per_call
        share = (
            f", {100 * self.sealing_ms / build:.2f}% of the build's service CPU" if build else ""
        )
        return (
            f"per-learner snapshot encryption (subject digest + AES-GCM seal of "
            f"{self.sealed_bytes} bytes): {1000 * self.sealing_ms:.1f} µs per build{share}"
        )

    def _snapshot_cpu(self, persisted: LoadResult) -> str:
        cpu, unpersisted = persisted.server_cpu_ms_per_call, self.unpersisted.server_cpu_ms_per_call
        return f"{cpu - unpersisted:.3f}" if cpu and unpersisted else "-"

    def _loops(self) -> str:
        """Each server's event-loop thread against the machine, and the loop CPU a build could
        spend at the goal: a loop near one core busy bounds its server's throughput."""
        floor, build = self.floor, self.load
        if not (floor.loop_cpu_ms_per_call and build.loop_cpu_ms_per_call):
            return "event-loop thread CPU: -"
        text = (
            f"event-loop thread CPU ms per call: floor {floor.loop_cpu_ms_per_call:.3f} "
            f"({floor.loop_cores_busy or 0:.2f} of a core busy), build "
            f"{build.loop_cpu_ms_per_call:.3f} ({build.loop_cores_busy or 0:.2f} busy); "
            f"machine cores busy: floor {floor.machine_cores_busy or 0:.2f}, build "
            f"{build.machine_cores_busy or 0:.2f} of {os.cpu_count()}"
        )
        if build.loop_cores_busy:
            # As busy a loop as now, at the goal's throughput.
            budget = build.loop_cores_busy * 1000 / (GOAL * floor.throughput)
            text += f"; a build's loop CPU at the goal: at most {budget:.3f} ms"
        return text

    def _cpu_ratio(self) -> str:
        floor, build = self.floor.server_cpu_ms_per_call, self.load.server_cpu_ms_per_call
        return f"{floor / build:.2f}" if floor and build else "-"


def postgres_processes(data_dir: Path) -> list[psutil.Process]:
    """The postmaster of ``data_dir`` and every process it started."""
    postmaster = psutil.Process(int((data_dir / "postmaster.pid").read_text().split()[0]))
    return [postmaster, *postmaster.children(recursive=True)]


@contextmanager
def seeded_database(scratch: Path) -> Iterator[tuple[str, Path]]:
    """(owner DSN, data directory) of a migrated, seeded database on an embedded server."""
    server = start_embedded_postgres(scratch / "pgdata", cleanup="delete")
    try:
        yield server.dsn, server.data_dir
    finally:
        server.stop()


async def prepare_database(owner_dsn: str) -> str:
    """A migrated, seeded ``nemo_bench`` database; the context role's DSN for it."""
    conn = await connect(owner_dsn)
    try:
        await conn.execute("CREATE DATABASE nemo_bench")
    finally:
        await conn.close()
    dsn = dsn_with(owner_dsn, database="nemo_bench")
    await migrate(dsn, role_passwords={})
    await seed(dsn)
    return dsn_with(dsn, user="nemo_context")


def context_environment(port: int, context_dsn: str, scratch: Path) -> dict[str, str]:
    """The settings of a benchmark context service: on ``port``, the gateway as its caller
    (token :data:`CALLER_TOKEN`), snapshots under ``scratch``."""
    return {
        "NEMO_CONTEXT_LISTEN_ADDRESS": f"127.0.0.1:{port}",
        "NEMO_CONTEXT_DATABASE_URL": context_dsn,
        "NEMO_CONTEXT_CALLER_TOKENS": f'{{"gateway": "{CALLER_TOKEN}"}}',
        "NEMO_CONTEXT_PSEUDONYM_KEY": secrets.token_hex(32),
        "NEMO_CONTEXT_SNAPSHOT_MASTER_KEY": secrets.token_hex(32),
        "NEMO_CONTEXT_SNAPSHOT_DIR": str(scratch / "snapshots"),
        "NEMO_CONTEXT_LOG_LEVEL": "WARNING",
    }


async def measure_build_context(*, concurrency: int, seconds: float) -> ContextBenchmark:
    """Load BuildContext(tutor_hint, persist) from ``concurrency`` callers, the floor (the
    build's read alone), the build without its snapshot and the build with an S3 snapshot, the
    same way on the same database, taking turns (:data:`ROUNDS` turns, ``seconds`` in all for
    each) so that all go through the same drift of the machine."""
    scratch_root = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with (
        tempfile.TemporaryDirectory(prefix="nemo-bench-", dir=scratch_root) as scratch,
        seeded_database(Path(scratch)) as (owner_dsn, data_dir),
        moto_s3_server() as s3,
        keep_alive_s3_server(s3) as kept_s3,
    ):
        context_dsn = await prepare_database(owner_dsn)
        await create_bucket(s3, SNAPSHOT_BUCKET)
        port, floor_port, s3_port, kept_port = free_port(), free_port(), free_port(), free_port()
        # The floor server reads the same NEMO_CONTEXT_ settings as the service.
        environment = {**os.environ, **context_environment(port, context_dsn, Path(scratch))}
        s3_environment = {
            **os.environ,
            **context_environment(s3_port, context_dsn, Path(scratch)),
            **context_snapshot_environment(s3, SNAPSHOT_BUCKET),
        }
        kept_environment = {
            **os.environ,
            **context_environment(kept_port, context_dsn, Path(scratch)),
            **context_snapshot_environment(kept_s3, SNAPSHOT_BUCKET),
        }
        floor_command = ["-m", "benchmarks.floor_servers", "learner-read", str(floor_port)]
        with (
            server_process(["-m", "nemo_context"], port, environment) as service,
            server_process(floor_command, floor_port, environment) as floor_server,
            server_process(["-m", "nemo_context"], s3_port, s3_environment) as s3_service,
            server_process(["-m", "nemo_context"], kept_port, kept_environment) as kept_service,
        ):
            async with (
                grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
                grpc.aio.insecure_channel(f"127.0.0.1:{floor_port}") as floor_channel,
                grpc.aio.insecure_channel(f"127.0.0.1:{s3_port}") as s3_channel,
                grpc.aio.insecure_channel(f"127.0.0.1:{kept_port}") as kept_channel,
            ):
                floor, build, unpersisted, s3_build, kept_build = await run_alternating(
                    [
                        Load(
                            f"floor: learner read alone, {concurrency} callers",
                            empty_call(floor_channel),
                            floor_server,
                        ),
                        Load(
                            f"BuildContext(tutor_hint) + local snapshot, {concurrency} callers",
                            _build_call(channel),
                            service,
                            # PostgreSQL's CPU while the builds run, over the measured ones.
                            counted=lambda: postgres_processes(data_dir),
                        ),
                        Load(
                            f"BuildContext(tutor_hint), no snapshot, {concurrency} callers",
                            _build_call(channel, persist=False),
                            service,
                        ),
                        Load(
                            f"BuildContext + S3 snapshot (moto), {concurrency} callers",
                            _build_call(s3_channel),
                            s3_service,
                        ),
                        Load(
                            f"BuildContext + S3 snapshot (kept alive), {concurrency} callers",
                            _build_call(kept_channel),
                            kept_service,
                        ),
                    ],
                    concurrency=concurrency,
                    seconds=seconds,
                    rounds=ROUNDS,
                    warmup_seconds=WARMUP_SECONDS,
                )
                built = await _build_call(channel, persist=False)()
        gate = await measure_gate(context_dsn)
    snapshot = canonical_json(built.bundle)
    return ContextBenchmark(
        load=build,
        postgres_cpu_ms_per_build=build.counted_cpu_ms_per_call,
        floor=floor,
        unpersisted=unpersisted,
        s3=s3_build,
        keep_alive=kept_build,
        gate=gate,
        sealing_ms=sealing_cpu_ms(snapshot),
        sealed_bytes=len(snapshot),
    )


SEALS = 20_000


def sealing_cpu_ms(snapshot: bytes) -> float:
    """CPU milliseconds per build that encryption adds to a snapshot write whose key is cached:
    the learner's subject digest and the seal, averaged over :data:`SEALS` of them."""
    master = MasterKey(secrets.token_bytes(32))
    key = secrets.token_bytes(32)
    input_ref = f"ai-context/2026-12-05/nemo_{'0' * 24}/{uuid.uuid4()}.json"
    started = time.process_time()
    for _ in range(SEALS):
        master.subject("L-2041-1")
        seal(key, input_ref, snapshot)
    return (time.process_time() - started) * 1000 / SEALS


def _build_call(
    channel: grpc.aio.Channel, *, persist: bool = True
) -> Callable[[], Awaitable[context_service_pb2.BuildContextResponse]]:
    stub = context_service_pb2_grpc.ContextServiceStub(channel)
    metadata = ((DEFAULT_CALLER_TOKEN_METADATA_KEY, CALLER_TOKEN),)
    request = context_service_pb2.BuildContextRequest(
        learner_id="L-2041-1", purpose="tutor_hint", persist=persist
    )
    mismatch = "the snapshot was not written" if persist else "a snapshot was written"

    async def call() -> context_service_pb2.BuildContextResponse:
        response: context_service_pb2.BuildContextResponse = await stub.BuildContext(
            request, metadata=metadata, timeout=5
        )
        if bool(response.bundle.input_ref) != persist:
            raise RuntimeError(mismatch)
        return response

    return call
