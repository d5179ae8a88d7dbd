"""Images: one Dockerfile per service plus the ops (migration) image, each passing hadolint,
multi-stage with locked dependencies, a slim non-root runtime without build tools, and a build
context (.dockerignore) that carries what the builds copy and nothing private."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from nemo_ops.cli import SUBCOMMANDS
from nemo_testing.pgbouncer import pgbouncer_binary, pgbouncer_version
from tests.deploy.deploy_dockerfile import parse_stages
from tests.deploy.deploy_manifests import DOCKER, REPO

#: Image name -> (Dockerfile, workspace package installed, console script run).
IMAGES: dict[str, tuple[str, str, str]] = {
    "nemo-context": ("context.Dockerfile", "nemo-context", "nemo-context"),
    "nemo-gateway": ("gateway.Dockerfile", "nemo-gateway", "nemo-gateway"),
    "nemo-toolplane": ("toolplane.Dockerfile", "nemo-toolplane", "nemo-toolplane"),
    "nemo-console": ("console.Dockerfile", "nemo-console", "nemo-console"),
    "nemo-ops": ("ops.Dockerfile", "nemo-ops", "nemo"),
}

HADOLINT = Path(sys.executable).parent / "hadolint"
_SLIM_PYTHON = re.compile(r"^python:3\.11\.\d+-slim-[a-z]+$")


def _lock_packages() -> dict[str, dict[str, Any]]:
    lock = tomllib.loads((REPO / "uv.lock").read_text(encoding="utf-8"))
    return {package["name"]: package for package in lock["package"]}


def workspace_closure(package: str) -> dict[str, str]:
    """Workspace members ``package`` needs at run time (itself included), with their paths."""
    packages = _lock_packages()
    members = {
        name: str(p["source"]["editable"])
        for name, p in packages.items()
        if "editable" in p["source"]
    }
    needed: dict[str, str] = {}
    pending = [package]
    while pending:
        name = pending.pop()
        if name in needed:
            continue
        needed[name] = members[name]
        dependencies = packages[name].get("dependencies", [])
        pending += [d["name"] for d in dependencies if d["name"] in members]
    return needed


def direct_dependencies(package: str) -> set[str]:
    """Names of the packages the lock file lists as direct dependencies of ``package``."""
    dependencies = _lock_packages()[package].get("dependencies", [])
    return {d["name"] for d in dependencies}


dockerfiles = pytest.mark.parametrize("image", sorted(IMAGES))

#: The local model server's image: a project of its own (local-model/uv.lock), not a workspace
#: package, so the package checks below do not apply to it.
LOCAL_MODEL_DOCKERFILE = "local-model.Dockerfile"
#: The connection pooler's image: Debian's PgBouncer package, no Python at all.
PGBOUNCER_DOCKERFILE = "pgbouncer.Dockerfile"


def test_there_is_one_dockerfile_per_image() -> None:
    assert sorted(p.name for p in DOCKER.glob("*Dockerfile")) == sorted(
        [
            *(dockerfile for dockerfile, _, _ in IMAGES.values()),
            LOCAL_MODEL_DOCKERFILE,
            PGBOUNCER_DOCKERFILE,
        ]
    )


@pytest.mark.parametrize(
    "dockerfile_name",
    [*sorted(d for d, _, _ in IMAGES.values()), LOCAL_MODEL_DOCKERFILE, PGBOUNCER_DOCKERFILE],
)
def test_hadolint_passes(dockerfile_name: str) -> None:
    dockerfile = DOCKER / dockerfile_name
    result = subprocess.run(
        [str(HADOLINT), "--no-color", "--failure-threshold", "style", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, ""), result.stdout


def test_hadolint_rejects_an_unpinned_root_image(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM python:latest\nRUN pip install uv\n")
    result = subprocess.run(
        [str(HADOLINT), "--no-color", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "DL3007" in result.stdout
    assert "DL3013" in result.stdout


@dockerfiles
def test_the_runtime_stage_is_slim_non_root_and_free_of_build_tools(image: str) -> None:
    dockerfile, _, script = IMAGES[image]
    builder, runtime = parse_stages(DOCKER / dockerfile)
    # Same pinned interpreter in both stages: the environment's scripts point at it.
    assert builder.base == runtime.base
    assert _SLIM_PYTHON.match(runtime.base), runtime.base
    assert runtime.name is None
    assert builder.name == "builder"
    user = runtime.all("USER")[-1].split(":")
    assert all(part.isdigit() and int(part) > 0 for part in user), user
    assert runtime.all("COPY")[0] == "--from=builder /opt/nemo/venv /opt/nemo/venv"
    assert all(
        not argument.startswith("--from") or argument.startswith("--from=builder ")
        for argument in runtime.all("COPY")
    )
    # The only command run in the final image creates the numeric user.
    assert [r.split()[0] for r in runtime.all("RUN")] == ["groupadd"]
    assert not any(re.search(r"\b(uv|pip|apt-get|gcc|git)\b", r) for r in runtime.all("RUN"))
    # Exec form, so SIGTERM reaches the server (which drains) instead of a shell.
    assert json.loads(runtime.all("ENTRYPOINT")[-1]) == [script]
    assert not re.search(r"(TOKEN|PASSWORD|SECRET|API_KEY)", " ".join(runtime.all("ENV")))


def test_the_local_model_image_compiles_in_the_builder_and_runs_slim_and_non_root() -> None:
    builder, runtime = parse_stages(DOCKER / LOCAL_MODEL_DOCKERFILE)
    # The compilers are in the full image of the same interpreter as the slim runtime.
    assert builder.base == runtime.base.replace("-slim-", "-")
    assert _SLIM_PYTHON.match(runtime.base), runtime.base
    assert [r for r in builder.all("RUN") if " uv sync " in f" {r} "] == [
        "--mount=type=cache,target=/root/.cache/uv uv sync --frozen --no-dev"
    ]
    assert builder.all("WORKDIR") == ["/src/local-model"]
    user = runtime.all("USER")[-1].split(":")
    assert all(part.isdigit() and int(part) > 0 for part in user), user
    # One package in the final image: OpenMP's runtime, pinned; no compiler, no uv.
    [run] = runtime.all("RUN")
    assert re.search(r"install --yes --no-install-recommends libgomp1=\S+ ", run)
    assert not re.search(r"\b(uv|pip|gcc|g\+\+|cmake|git)\b", run)
    assert json.loads(runtime.all("ENTRYPOINT")[-1])[:2] == ["python", "/opt/nemo/serve.py"]


@dockerfiles
def test_the_builder_installs_only_the_locked_package(image: str) -> None:
    dockerfile, package, _ = IMAGES[image]
    builder, _ = parse_stages(DOCKER / dockerfile)
    syncs = [r for r in builder.all("RUN") if " uv sync " in f" {r} "]
    assert len(syncs) == 2
    for sync in syncs:
        words = sync.split()
        assert "--frozen" in words, sync
        assert "--no-dev" in words, sync
        assert words[words.index("--package") + 1] == package, sync
    assert "--no-install-workspace" in syncs[0]
    assert "--no-editable" in syncs[1]
    uv_image = builder.all("COPY")[0].split()[0].removeprefix("--from=")
    make_version = re.search(r"^UV_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert make_version is not None
    assert uv_image == f"ghcr.io/astral-sh/uv:{make_version.group(1)}"


@dockerfiles
def test_the_builder_copies_every_workspace_package_the_image_needs(image: str) -> None:
    dockerfile, package, _ = IMAGES[image]
    builder, _ = parse_stages(DOCKER / dockerfile)
    copies = [c.split() for c in builder.all("COPY") if not c.startswith("--from")]
    sources = {source for *found, _ in copies for source in found}
    for member_path in workspace_closure(package).values():
        assert f"{member_path}/pyproject.toml" in sources, member_path
        assert member_path in sources, member_path
    # The lock file decides every version; the root manifest defines the workspace.
    assert {"pyproject.toml", "uv.lock"} <= sources


def test_the_ops_image_leaves_out_the_embedded_postgres_only_dev_up_needs() -> None:
    builder, _ = parse_stages(DOCKER / IMAGES["nemo-ops"][0])
    syncs = [r for r in builder.all("RUN") if "uv sync" in r]
    assert all("--no-install-package pgserver" in sync for sync in syncs)
    assert "pgserver" in direct_dependencies("nemo-ops")
    # And the command still works without it (the migration Job test runs it for real).
    code = (
        "import sys; sys.modules['pgserver'] = None; "
        "from nemo_ops.cli import main; main(['migrate', '--help'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_ops_image_defaults_to_migrating() -> None:
    _, runtime = parse_stages(DOCKER / IMAGES["nemo-ops"][0])
    command = json.loads(runtime.all("CMD")[-1])
    assert command == ["migrate"]
    assert command[0] in {subcommand.name for subcommand in SUBCOMMANDS}


@dockerfiles
def test_the_entrypoint_is_the_packages_console_script(image: str) -> None:
    _dockerfile, package, script = IMAGES[image]
    member = workspace_closure(package)[package]
    project = tomllib.loads((REPO / member / "pyproject.toml").read_text())["project"]
    assert script in project["scripts"]


# --- build context ---------------------------------------------------------------------------


def _dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    patterns = []
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        glob = line.removeprefix("!").strip("/")
        regex = ""
        for part in re.split(r"(\*\*/|\*\*|\*|\?)", glob):
            regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(
                part, re.escape(part)
            )
        patterns.append((negated, re.compile(regex)))
    return patterns


def in_build_context(relative: str) -> bool:
    """Whether Docker sends ``relative`` to the builder: the last pattern matching the path or
    one of its parent directories decides."""
    parts = relative.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    included = True
    for negated, pattern in _dockerignore_patterns():
        if any(pattern.fullmatch(candidate) for candidate in candidates):
            included = negated
    return included


def _source_files(directory: Path) -> list[Path]:
    # Tests and bytecode caches are left out of the context on purpose.
    return [
        path
        for path in directory.rglob("*")
        if path.is_file() and not {"tests", "__pycache__"} & set(path.relative_to(REPO).parts)
    ]


def test_the_build_context_carries_what_the_builds_copy() -> None:
    needed = [
        "pyproject.toml",
        "uv.lock",
        "docs/architecture.md",
        "ops/src/nemo_ops/migrations/0001_roles_and_schemas.sql",
    ]
    for dockerfile in [*(image[0] for image in IMAGES.values()), LOCAL_MODEL_DOCKERFILE]:
        builder, runtime = parse_stages(DOCKER / dockerfile)
        for stage in (builder, runtime):
            for copy in stage.all("COPY"):
                if copy.startswith("--from"):
                    continue
                *sources, _ = copy.split()
                for source in sources:
                    path = REPO / source
                    files = [path] if path.is_file() else _source_files(path)
                    assert files, source
                    needed += [str(p.relative_to(REPO)) for p in files]
    missing = [path for path in needed if not in_build_context(path)]
    assert missing == []


@pytest.mark.parametrize(
    "private",
    [
        ".git/config",
        ".venv/bin/python",
        ".nemo/dev.env",
        ".nemo/pseudonym.key",
        "services/context/tests/snapshots/test_store.py",
        "ops/src/nemo_ops/__pycache__/cli.cpython-311.pyc",
        "libs/nemo-testing/src/nemo_testing/plugin.py",
        "deploy/k8s/create_secrets.py",
        "caller-tokens.json",
    ],
)
def test_the_build_context_leaves_out_local_state_tests_and_secrets(private: str) -> None:
    assert not in_build_context(private)


def test_the_pooler_image_runs_the_tested_pgbouncer_as_a_numeric_user() -> None:
    [runtime] = parse_stages(DOCKER / PGBOUNCER_DOCKERFILE)
    [run] = runtime.all("RUN")
    pinned = re.search(r"install -y --no-install-recommends pgbouncer=(\S+) ", run)
    assert pinned is not None, run
    # The release the test suite runs the stack through (Debian's package on this machine).
    upstream = pinned.group(1).split("-")[0]
    assert ".".join(map(str, pgbouncer_version(pgbouncer_binary()))) == ".".join(
        upstream.split(".")[:2]
    )
    # Configuration comes mounted: the package's own is removed, so a missing mount fails.
    assert "/etc/pgbouncer/*" in run
    user = runtime.all("USER")[-1].split(":")
    assert all(part.isdigit() and int(part) > 0 for part in user), user
    assert json.loads(runtime.all("ENTRYPOINT")[-1]) == ["/usr/sbin/pgbouncer"]
    # SIGINT lets transactions in flight finish; SIGTERM would cut them off.
    assert runtime.all("STOPSIGNAL") == ["SIGINT"]
