"""What an evaluation runs on: a fresh embedded PostgreSQL with the demo seed, the context service
and the gateway as processes (as `nemo dev up` starts them), the model provider behind a recording
proxy (so every body the provider received can be checked), and, for the local provider, the
local model server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from nemo_ops import local_model
from nemo_ops.embedded_pg import start_embedded_postgres
from nemo_ops.migrate import migrate
from nemo_ops.seed import seed
from nemo_ops.service_processes import (
    CALLER_IDENTITIES,
    Ports,
    grpc_serving,
    log_tail,
    service_environments,
    spawn_service,
    write_pseudonym_key,
)
from nemo_testing.ports import free_port
from nemo_testing.recording_proxy import RecordingProxy

STARTUP_SECONDS = 60.0

#: Names of settings that hold secrets (or point at them): never copied into a report.
_SECRET = re.compile(r"(_KEY|_TOKENS?|_PASSWORD)(_FILE)?$")

#: Gateway settings an evaluation passes through from its own environment.
PASSED_THROUGH = ("NEMO_GATEWAY_",)

#: Gateway settings for the local model unless the environment sets them: a 135M model on a
#: shared CPU answers a long JSON prompt in tens of seconds, and its server keeps working on a
#: request the gateway gave up on, so short timeouts would cascade into the next cases.
LOCAL_DEFAULTS = {
    "NEMO_GATEWAY_REQUEST_TIMEOUT_SECONDS": "150",
    "NEMO_GATEWAY_OUTPUT_TOKEN_LIMIT": "512",
}


@dataclass
class EvalStack:
    """The running parts an evaluation talks to."""

    gateway_address: str
    internal_token: str
    metadata_key: str
    proxy: RecordingProxy
    gateway_log: Path
    provider: str
    settings: dict[str, str]
    """The gateway settings the evaluation set or passed through (no secrets among them)."""


@dataclass(frozen=True)
class ProviderChoice:
    """The provider under evaluation and where its API is."""

    provider: str
    upstream: str | None
    """Origin the proxy forwards to; None for the local model (started here)."""


def provider_choice(environ: Mapping[str, str]) -> ProviderChoice:
    """The configured provider: ``NEMO_GATEWAY_PROVIDER`` (default ``local``) and, for a hosted
    one, ``NEMO_GATEWAY_LLM_BASE_URL``."""
    provider = environ.get("NEMO_GATEWAY_PROVIDER", "local").strip().lower() or "local"
    if provider == "local":
        return ProviderChoice("local", None)
    if provider == "baseline":
        return ProviderChoice("baseline", None)
    base_url = environ.get("NEMO_GATEWAY_LLM_BASE_URL")
    if not base_url:
        raise SystemExit(f"NEMO_GATEWAY_PROVIDER={provider} needs NEMO_GATEWAY_LLM_BASE_URL")
    return ProviderChoice(provider, base_url)


def _origin_and_path(url: str) -> tuple[str, str]:
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    return f"{scheme}://{host}", f"/{path}".rstrip("/")


@contextlib.asynccontextmanager
async def eval_stack(
    work_dir: Path, choice: ProviderChoice, progress: Callable[[str], None]
) -> AsyncIterator[EvalStack]:
    """Start everything in ``work_dir`` (state, logs) and stop it all on exit."""
    logs = work_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    database = start_embedded_postgres(work_dir / "pgdata", cleanup="delete")
    processes: list[asyncio.subprocess.Process] = []
    try:
        await migrate(database.dsn)
        report = await seed(database.dsn)
        progress(f"database seeded ({report.rows} rows)")
        upstream, path = (None, "/v1")
        if choice.provider == "local":
            port = free_port()
            log = logs / "local-model.log"
            progress(f"loading {local_model.MODEL_NAME}")
            server = await local_model.spawn_local_model(port, log)
            processes.append(server)
            seconds = await local_model.wait_until_loaded(server, port, log, progress=progress)
            progress(f"{local_model.MODEL_NAME} loaded in {seconds:.1f} s")
            upstream = f"http://127.0.0.1:{port}"
        elif choice.upstream is not None:
            upstream, path = _origin_and_path(choice.upstream)
        async with RecordingProxy(upstream or "http://127.0.0.1:9") as proxy:
            stack = await _start_services(work_dir, database.dsn, choice, proxy, path, processes)
            yield stack
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        for process in processes:
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
        database.stop()


async def _start_services(
    work_dir: Path,
    dsn: str,
    choice: ProviderChoice,
    proxy: RecordingProxy,
    path: str,
    processes: list[asyncio.subprocess.Process],
) -> EvalStack:
    ports = Ports(free_port(), free_port(), free_port(), free_port())
    tokens = {identity: secrets.token_urlsafe(24) for identity in CALLER_IDENTITIES}
    key = write_pseudonym_key(work_dir / "pseudonym.key")
    environments = service_environments(dsn, ports, tokens, work_dir, {})
    environments["context"]["NEMO_CONTEXT_PSEUDONYM_KEY_FILE"] = str(key)
    passed = {k: v for k, v in os.environ.items() if k.startswith(PASSED_THROUGH)}
    if choice.provider == "local":
        passed = LOCAL_DEFAULTS | passed
    base = {"PATH": os.environ.get("PATH", ""), "NEMO_CONTEXT_LOG_LEVEL": "WARNING"}
    environments["gateway"] |= passed | {
        "NEMO_GATEWAY_PROVIDER": choice.provider,
        "NEMO_GATEWAY_LLM_BASE_URL": f"{proxy.openai_base_url.removesuffix('/v1')}{path}",
        # Every case is run, not served from the cache.
        "NEMO_GATEWAY_CACHE_MAX_ENTRIES": "0",
    }
    logs = work_dir / "logs"
    for name in ("context", "gateway"):
        process = await spawn_service(name, base | environments[name], logs / f"{name}.log")
        processes.append(process)
        address = f"127.0.0.1:{getattr(ports, name)}"
        deadline = time.monotonic() + STARTUP_SECONDS
        while not await grpc_serving(address):
            if process.returncode is not None or time.monotonic() > deadline:
                raise SystemExit(f"{name} did not start:\n{log_tail(logs / f'{name}.log', 20)}")
            await asyncio.sleep(0.2)
    return EvalStack(
        gateway_address=f"127.0.0.1:{ports.gateway}",
        internal_token=tokens["internal"],
        metadata_key="x-nemo-caller-token",
        proxy=proxy,
        gateway_log=logs / "gateway.log",
        provider=choice.provider,
        settings={k: v for k, v in passed.items() if not _SECRET.search(k)},
    )
