"""The MCP edge under load: ``tools/call`` through the tool plane next to the official SDK serving
a trivial echo tool with no authentication, measured in the same run.

Three servers run as their own processes: the SDK echo server (the baseline), and the tool plane
(full path: bearer token, grants and policies, resource authorization, audit) with the context
service behind it, on an embedded PostgreSQL migrated and seeded for the run. The load comes from
several client processes speaking HTTP/1.1 keep-alive over raw sockets (an httpx client in one
process tops out near 2,300 calls/s on this machine, below what the server can take), all inside
one measuring window; the server process's CPU time over that window gives CPU milliseconds per
call. For ``learner.get_profile`` the context service's CPU over the same window is measured too:
the sum of both is what one learner read costs the platform. The same docs call is also made with
an OAuth access token (a JWT from the local authorization server, for a parent through the
development client) and with a static agent token of the same agent, paced alike: their ratio is
what verifying a JWT adds per ``tools/call``. Requests use the 2026-07-28 revision, which the
official client negotiates by default.

Roles of this module's command line (used by the benchmark itself):
``python -m benchmarks.toolplane echo-server PORT`` and
``python -m benchmarks.toolplane client PORT TOKEN TOOL ARGUMENTS_JSON CONCURRENCY INTERVAL``
(INTERVAL 0: back to back; else seconds between one connection's requests); a client
prints ``ready`` once imported, then reads the window (``START STOP``, epoch seconds) from stdin,
so the time it takes to start never eats into the window.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
import psutil
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import Route

from benchmarks.load import LoadResult, report, server_process
from nemo_core.db import connect, dsn_with
from nemo_ops.embedded_pg import start_embedded_postgres
from nemo_ops.local_oauth import seeded_accounts
from nemo_ops.migrate import migrate
from nemo_ops.seed import seed
from nemo_testing.oauth import OAuthServer, running_authorization_server
from nemo_testing.ports import free_port
from nemo_toolplane.tokens import issue_token

MODERN = "2026-07-28"
CLIENT_PROCESSES = 4
REPOSITORY = Path(__file__).resolve().parents[1]
DOCS_QUERY = {"query": "xac thuc bearer token", "limit": 5}
#: A rate every machine sustains, so CPU per call is compared at the same load (the server's CPU
#: per call grows when it is saturated, and with it the noise between runs).
PACED_RATE = 100.0


def request_bytes(port: int, token: str | None, tool: str, arguments: dict[str, Any]) -> bytes:
    """One keep-alive POST of a 2026-07-28 ``tools/call``, ready to write to a socket."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": tool,
                "arguments": arguments,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    ).encode()
    headers = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"MCP-Protocol-Version: {MODERN}",
        "Mcp-Method: tools/call",
        f"Mcp-Name: {tool}",
        f"Content-Length: {len(body)}",
    ]
    if token is not None:
        headers.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(headers) + "\r\n\r\n").encode() + body


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> bool:
    """Send one request, read its whole response; True when it was a 200 without isError."""
    writer.write(data)
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length)
    return head.startswith(b"HTTP/1.1 200") and b'"isError":true' not in body


async def _client(
    port: int, data: bytes, start: float, stop: float, interval: float
) -> tuple[list[float], int]:
    """One connection sending ``data`` until ``stop``: back to back, or one request every
    ``interval`` seconds when it is above 0 (a paced load)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    latencies: list[float] = []
    errors = 0
    next_send = time.time()
    try:
        while (began := time.time()) < stop:
            if interval:
                await asyncio.sleep(max(0.0, next_send - began))
                next_send += interval
                began = time.time()
            ok = await _exchange(reader, writer, data)
            ended = time.time()
            if began >= start and ended <= stop:
                if ok:
                    latencies.append(ended - began)
                else:
                    errors += 1
    finally:
        writer.close()
    return latencies, errors


async def _run_client(args: list[str]) -> None:
    port, token, tool, arguments, concurrency, interval = args
    data = request_bytes(int(port), token or None, tool, json.loads(arguments))
    print("ready", flush=True)
    start, stop = sys.stdin.readline().split()
    results = await asyncio.gather(
        *(
            _client(int(port), data, float(start), float(stop), float(interval))
            for _ in range(int(concurrency))
        )
    )
    latencies = [latency for found, _ in results for latency in found]
    print(json.dumps({"latencies": latencies, "errors": sum(e for _, e in results)}))


def _serve_echo(port: int) -> None:
    """The baseline: the official SDK's low-level server, stateless JSON, one echo tool."""
    import mcp_types as types
    from starlette.applications import Starlette

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema=schema)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content={"text": text}
        )

    server = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(
        routes=[Route("/mcp", StreamableHTTPASGIApp(manager), methods=["POST"])], lifespan=lifespan
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_config=None, access_log=False)


@dataclass(frozen=True)
class Stack:
    echo_port: int
    toolplane_port: int
    research_token: str
    parent_token: str
    toolplane: psutil.Process
    context: psutil.Process
    echo: psutil.Process


async def _prepare_database(owner_dsn: str) -> tuple[str, str]:
    await migrate(owner_dsn)
    await seed(owner_dsn)
    conn = await connect(owner_dsn)
    try:
        research = await issue_token(conn, "research-agent", label="bench")
        parent = await issue_token(conn, "learning-agent", user_id="U-2041-P1", label="bench")
    finally:
        await conn.close()
    return research.token, parent.token


@contextlib.contextmanager
def _stack(
    owner_dsn: str, tokens: tuple[str, str], state: Path, oauth_issuer: str
) -> Iterator[Stack]:
    caller = f"toolplane-{secrets.token_hex(16)}"
    context_port, grpc_port, mcp_port, echo_port = (free_port() for _ in range(4))
    context_env = {
        "NEMO_CONTEXT_LISTEN_ADDRESS": f"127.0.0.1:{context_port}",
        "NEMO_CONTEXT_DATABASE_URL": dsn_with(owner_dsn, user="nemo_context"),
        "NEMO_CONTEXT_CALLER_TOKENS": json.dumps({"toolplane": caller}),
        "NEMO_CONTEXT_PSEUDONYM_KEY": secrets.token_hex(32),
        "NEMO_CONTEXT_SNAPSHOT_MASTER_KEY": secrets.token_hex(32),
        "NEMO_CONTEXT_SNAPSHOT_DIR": str(state / "snapshots"),
        "NEMO_CONTEXT_LOG_LEVEL": "WARNING",
    }
    toolplane_env = {
        "NEMO_TOOLPLANE_LISTEN_ADDRESS": f"127.0.0.1:{grpc_port}",
        "NEMO_TOOLPLANE_MCP_PORT": str(mcp_port),
        "NEMO_TOOLPLANE_DATABASE_URL": dsn_with(owner_dsn, user="nemo_toolplane"),
        "NEMO_TOOLPLANE_CONTEXT_ADDRESS": f"127.0.0.1:{context_port}",
        "NEMO_TOOLPLANE_CLIENT_TOKEN": caller,
        "NEMO_TOOLPLANE_CALLER_TOKENS": json.dumps({"internal": secrets.token_hex(16)}),
        "NEMO_TOOLPLANE_DOCS_DIR": str(REPOSITORY / "docs"),
        "NEMO_TOOLPLANE_AGENT_CALLS_PER_SECOND": "1000000",
        "NEMO_TOOLPLANE_AGENT_CALL_BURST": "1000000",
        "NEMO_TOOLPLANE_USER_CALLS_PER_SECOND": "1000000",
        "NEMO_TOOLPLANE_USER_CALL_BURST": "1000000",
        "NEMO_TOOLPLANE_LOG_LEVEL": "WARNING",
        "NEMO_TOOLPLANE_OAUTH_ISSUER": oauth_issuer,
        "NEMO_TOOLPLANE_OAUTH_RESOURCE": f"http://127.0.0.1:{mcp_port}/mcp",
    }
    os.environ.update({**context_env, **toolplane_env})
    try:
        with (
            server_process(["-m", "nemo_context"], context_port) as context,
            server_process(["-m", "nemo_toolplane"], mcp_port) as toolplane,
            server_process(
                ["-m", "benchmarks.toolplane", "echo-server", str(echo_port)], echo_port
            ) as echo,
        ):
            yield Stack(
                echo_port, mcp_port, *tokens, toolplane=toolplane, context=context, echo=echo
            )
    finally:
        for name in (*context_env, *toolplane_env):
            os.environ.pop(name, None)


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


@dataclass(frozen=True)
class Run:
    """One measurement: which server, and which call the clients repeat."""

    name: str
    server: psutil.Process
    port: int
    token: str | None
    tool: str
    arguments: dict[str, Any]
    #: Services behind the server whose CPU the call also costs (the context service).
    behind: tuple[psutil.Process, ...] = ()
    #: Calls per second offered in total; None for closed loop (each caller back to back).
    rate: float | None = None


@dataclass(frozen=True)
class Measured:
    """A run's result, the server's share of one core, and the CPU per call of each service
    behind it."""

    result: LoadResult
    share: float
    behind_cpu_ms_per_call: tuple[float, ...]


async def measure(run: Run, *, concurrency: int, seconds: float, warmup: float = 1.5) -> Measured:
    """Load from several client processes; returns the result, the server's CPU share of one
    core during the window, and the CPU per call of the services behind it. The window opens
    ``warmup`` seconds after every client is ready."""
    per_process = max(1, concurrency // CLIENT_PROCESSES)
    clients = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.toolplane",
            "client",
            str(run.port),
            run.token or "",
            run.tool,
            json.dumps(run.arguments),
            str(per_process),
            str(CLIENT_PROCESSES * per_process / run.rate if run.rate else 0),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(CLIENT_PROCESSES)
    ]
    for client in clients:
        assert client.stdout is not None
        await client.stdout.readline()
    start = time.time() + warmup
    stop = start + seconds
    for client in clients:
        assert client.stdin is not None
        client.stdin.write(f"{start} {stop}\n".encode())
        await client.stdin.drain()
    await asyncio.sleep(max(0.0, start - time.time()))
    cpu_before = _cpu(run.server)
    behind_before = [_cpu(process) for process in run.behind]
    await asyncio.sleep(max(0.0, stop - time.time()))
    cpu_used = _cpu(run.server) - cpu_before
    behind_used = [_cpu(p) - before for p, before in zip(run.behind, behind_before, strict=True)]
    outputs = [json.loads((await client.communicate())[0]) for client in clients]
    latencies = sorted(latency for output in outputs for latency in output["latencies"])
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    result = LoadResult(
        name=f"{run.name}, {concurrency} callers",
        calls=len(latencies),
        errors=sum(output["errors"] for output in outputs),
        seconds=seconds,
        p50_ms=quantiles[49] * 1000,
        p99_ms=quantiles[98] * 1000,
        server_cpu_ms_per_call=cpu_used * 1000 / len(latencies) if latencies else None,
    )
    behind = tuple(used * 1000 / max(1, len(latencies)) for used in behind_used)
    return Measured(result, cpu_used / seconds, behind)


async def measure_toolplane(*, concurrency: int, seconds: float) -> tuple[str, dict[str, float]]:
    """The report of this benchmark (the SDK echo baseline, then the tool plane's two calls),
    and its figures for the capacity model."""
    with tempfile.TemporaryDirectory(prefix="nemo-bench-") as scratch:
        state = Path(scratch)
        database = start_embedded_postgres(state / "pgdata", cleanup="delete")
        try:
            owner = dsn_with(database.dsn, database="nemo_bench")
            conn = await connect(database.dsn)
            try:
                await conn.execute('CREATE DATABASE "nemo_bench"')
            finally:
                await conn.close()
            tokens = await _prepare_database(owner)
            async with running_authorization_server(state / "oauth", seeded_accounts()) as oauth:
                measured = await _measure_stack(owner, tokens, state, oauth, concurrency, seconds)
        finally:
            database.stop()
    return _report(measured)


async def _measure_stack(
    owner: str,
    tokens: tuple[str, str],
    state: Path,
    oauth: OAuthServer,
    concurrency: int,
    seconds: float,
) -> list[Measured]:
    with _stack(owner, tokens, state, oauth.issuer) as stack:
        resource = f"http://127.0.0.1:{stack.toolplane_port}/mcp"
        jwt = (
            await oauth.tokens("U-2041-P1", resource=resource, scopes=["docs.read"])
        ).access_token
        runs = [
            Run("SDK echo tool, no auth", stack.echo, stack.echo_port, None, "echo",
                {"text": "hello"}),
            Run("tool plane docs.search_docs", stack.toolplane, stack.toolplane_port,
                stack.research_token, "docs.search_docs", DOCS_QUERY),
            Run("tool plane learner.get_profile", stack.toolplane, stack.toolplane_port,
                stack.parent_token, "learner.get_profile", {"learner_id": "L-2041-1"},
                behind=(stack.context,)),
            Run(f"learner.get_profile at {PACED_RATE:.0f} calls/s", stack.toolplane,
                stack.toolplane_port, stack.parent_token, "learner.get_profile",
                {"learner_id": "L-2041-1"}, behind=(stack.context,), rate=PACED_RATE),
            Run(f"docs, static token at {PACED_RATE:.0f} calls/s", stack.toolplane,
                stack.toolplane_port, stack.parent_token, "docs.search_docs", DOCS_QUERY,
                rate=PACED_RATE),
            Run(f"docs, OAuth JWT at {PACED_RATE:.0f} calls/s", stack.toolplane,
                stack.toolplane_port, jwt, "docs.search_docs", DOCS_QUERY, rate=PACED_RATE),
        ]  # fmt: skip
        return [await measure(run, concurrency=concurrency, seconds=seconds) for run in runs]


def _report(measured: list[Measured]) -> tuple[str, dict[str, float]]:
    results = [run.result for run in measured]
    lines = [report(results, results[0]), ""]
    for run in measured:
        side = "server-bound" if run.share >= 0.85 else "client/machine-bound"
        lines.append(f"{run.result.name:<44} server busy {run.share:4.0%} of a core: {side}")
    for profile in measured[2:4]:
        if profile.result.server_cpu_ms_per_call is not None:
            toolplane_cpu = profile.result.server_cpu_ms_per_call
            context_cpu = profile.behind_cpu_ms_per_call[0]
            lines.append(
                f"{profile.result.name}: CPU per call tool plane {toolplane_cpu:.3f} ms + "
                f"context {context_cpu:.3f} ms = {toolplane_cpu + context_cpu:.3f} ms"
            )
    docs_cpu, echo_cpu = results[1].server_cpu_ms_per_call, results[0].server_cpu_ms_per_call
    if docs_cpu and echo_cpu:
        verdict = "meets" if docs_cpu <= 2 * echo_cpu else "misses"
        lines.append(
            f"docs.search_docs server CPU per call is {docs_cpu / echo_cpu:.2f}x the SDK echo "
            f"server's ({verdict} the goal of at most 2x)"
        )
    static_cpu, jwt_cpu = (run.result.server_cpu_ms_per_call for run in measured[4:6])
    if static_cpu and jwt_cpu:
        lines.append(
            f"tools/call with an OAuth JWT costs {jwt_cpu / static_cpu:.2f}x the tool plane CPU of "
            f"the same call with a static agent token ({jwt_cpu:.3f} ms against "
            f"{static_cpu:.3f} ms)"
        )
    return "\n".join(lines), _figures(measured)


def _figures(measured: list[Measured]) -> dict[str, float]:
    """CPU per call of a docs call, and of a learner call (paced: the least disturbed figure)
    in the tool plane and behind it in the context service."""
    docs, paced = measured[1], measured[3]
    figures = {}
    if docs.result.server_cpu_ms_per_call is not None:
        figures["toolplane.docs_call.service_cpu_ms"] = docs.result.server_cpu_ms_per_call
    if paced.result.server_cpu_ms_per_call is not None:
        figures["toolplane.learner_call.service_cpu_ms"] = paced.result.server_cpu_ms_per_call
        figures["toolplane.learner_call.context_cpu_ms"] = paced.behind_cpu_ms_per_call[0]
    return figures


def main() -> None:
    role, *args = sys.argv[1:]
    if role == "echo-server":
        _serve_echo(int(args[0]))
    elif role == "client":
        asyncio.run(_run_client(args))
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main()
