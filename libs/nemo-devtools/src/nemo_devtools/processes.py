"""Child processes of the local stack and the tests: each in its own session, its output
appended to a log file, and sent SIGTERM by the kernel when its parent dies (PR_SET_PDEATHSIG),
so none outlives whoever started it."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def _dying_with_parent(argv: Sequence[str]) -> list[str]:
    """``argv`` run so that, on Linux, the kernel sends it SIGTERM if its parent dies without
    stopping it (SIGKILL, a crash), so no service outlives whoever started it.

    util-linux's ``setpriv`` sets the signal and execs ``argv``. Setting it from a
    ``preexec_fn`` instead runs Python in the forked child of a threaded process, with every
    fork hook of the parent's libraries (OpenTelemetry's starts a thread pool there), and the
    child could crash before it ever ran ``argv``.
    """
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "TERM", "--", *argv] if setpriv else list(argv)


async def spawn_logged(
    argv: Sequence[str], env: Mapping[str, str], log_path: Path, *, cwd: Path | None = None
) -> asyncio.subprocess.Process:
    """Start ``argv`` with exactly ``env`` (from ``cwd``): its own session (Ctrl-C in a terminal
    reaches only the parent, which stops its children in order), dying with its parent, its
    output appended to ``log_path``."""
    with log_path.open("ab") as log:
        return await asyncio.create_subprocess_exec(
            *_dying_with_parent(argv),
            env=dict(env),
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )


def log_tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of the log at ``path`` ("" if there is none yet)."""
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
