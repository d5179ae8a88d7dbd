"""A tool plane in a process of its own, as a replica runs: for SIGKILL and for several
replicas on one database."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from nemo_testing.ports import free_port, wait_for_port

from .conftest import CALLER_TOKENS, REPOSITORY


@contextlib.asynccontextmanager
async def toolplane_process(
    toolplane_dsn: str, log: Path, **settings: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """A tool plane in its own process and its MCP URL, once it listens; killed at the end."""
    grpc_port, mcp_port = free_port(), free_port()
    env = {
        **os.environ,
        "NEMO_TOOLPLANE_DATABASE_URL": toolplane_dsn,
        "NEMO_TOOLPLANE_LISTEN_ADDRESS": f"127.0.0.1:{grpc_port}",
        "NEMO_TOOLPLANE_MCP_PORT": str(mcp_port),
        "NEMO_TOOLPLANE_CALLER_TOKENS": json.dumps(CALLER_TOKENS),
        "NEMO_TOOLPLANE_DOCS_DIR": str(REPOSITORY / "docs"),
        "NEMO_TOOLPLANE_LOG_LEVEL": "WARNING",
        **{f"NEMO_TOOLPLANE_{name.upper()}": value for name, value in settings.items()},
    }
    with log.open("wb") as output:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "nemo_toolplane", env=env, stdout=output, stderr=output
        )
    try:
        await asyncio.to_thread(wait_for_port, mcp_port, 60)
        yield process, f"http://127.0.0.1:{mcp_port}/mcp"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
