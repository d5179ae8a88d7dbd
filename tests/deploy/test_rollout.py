"""Rollout order: deploy.sh applies the migration phase first and waits for the Job; the Job,
run exactly as its manifest and the ops image say, migrates a real database."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from nemo_core.db import connect
from nemo_ops.migrate import load_migrations
from nemo_toolplane.tools import build_registry
from tests.deploy.deploy_dockerfile import parse_stages
from tests.deploy.deploy_kustomize import containers_of
from tests.deploy.deploy_manifests import (
    DOCKER,
    K8S,
    MIGRATION_JOB,
    OVERLAYS,
    PHASE_LABEL,
    RENDERERS,
    decoded,
    key,
    load_create_secrets,
    materialize_environment,
    pod_spec,
    rendered,
    the,
)

DEPLOY_SCRIPT = K8S / "deploy.sh"
SHELLCHECK = Path(sys.executable).parent / "shellcheck"

create_secrets = load_create_secrets()


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_migration_phase_is_the_job_and_what_it_needs(renderer: str, overlay: str) -> None:
    resources = rendered(renderer, overlay)
    phase = sorted(
        key(r)[::2]
        for r in resources
        if r["metadata"].get("labels", {}).get(PHASE_LABEL) == "migrate"
    )
    assert phase == [
        ("Job", MIGRATION_JOB),
        ("Namespace", "nemo" if overlay == "prod" else "nemo-dev"),
        ("NetworkPolicy", "allow-dns-egress"),
        ("NetworkPolicy", "allow-postgresql-egress"),
        ("NetworkPolicy", "default-deny-all"),
        ("ServiceAccount", MIGRATION_JOB),
    ]


def test_deploy_sh_applies_the_phase_then_everything() -> None:
    script = DEPLOY_SCRIPT.read_text()
    assert f'PHASE_SELECTOR="{PHASE_LABEL}=migrate"' in script
    assert f'MIGRATION_JOB="{MIGRATION_JOB}"' in script
    phase = script.index('kubectl apply -k "$overlay" --selector "$PHASE_SELECTOR"')
    wait = script.index('.status.conditions[?(@.type=="Complete")]')
    everything = script.index('kubectl apply -k "$overlay"\n')
    assert phase < wait < everything
    deployments = re.search(r"^DEPLOYMENTS=\((.*)\)$", script, re.M)
    assert deployments is not None
    assert deployments.group(1).split() == [
        "nemo-context",
        "nemo-gateway",
        "nemo-toolplane",
        "nemo-console",
    ]


def test_deploy_sh_passes_shellcheck() -> None:
    result = subprocess.run(
        [str(SHELLCHECK), "--severity=style", str(DEPLOY_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "")


def test_deploy_sh_refuses_an_unknown_overlay() -> None:
    result = subprocess.run(
        ["bash", str(DEPLOY_SCRIPT), "staging"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "usage" in result.stderr


async def _run_ops_image(arguments: list[str], environment: dict[str, str], home: Path) -> str:
    """Run the ops image's command as the image would (its ENTRYPOINT with ``arguments``), in
    this environment, with pgserver absent as it is from the image."""
    _, runtime = parse_stages(DOCKER / "ops.Dockerfile")
    assert json.loads(runtime.all("ENTRYPOINT")[-1]) == ["nemo"]
    program = (
        "import sys; sys.modules['pgserver'] = None; "
        "from nemo_ops.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        program,
        *arguments,
        env={"PATH": os.environ["PATH"], "HOME": str(home), **environment},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, (arguments, stderr.decode())
    return stdout.decode()


async def test_the_migration_job_prepares_a_fresh_database(
    make_empty_database: Callable[[], Awaitable[str]], tmp_path: Path
) -> None:
    owner_dsn = await make_empty_database()
    resources = rendered("python", "prod")
    spec = pod_spec(the(resources, "Job", MIGRATION_JOB))
    manifests, _ = create_secrets.build_secrets(
        namespace="nemo",
        owner_database_url=owner_dsn,
        pseudonym_key="k" * 32,
        identifier_key="i" * 32,
        snapshot_master_key="m" * 32,
        llm_api_key="",
        embedding_api_key="",
    )
    secrets = {m["metadata"]["name"]: decoded(m) for m in manifests}
    # The session's server may check passwords: keep the ones its role DSNs use.
    for role in ("context", "toolplane"):
        password = os.environ.get(f"NEMO_DB_{role.upper()}_PASSWORD")
        if password:
            secrets["nemo-migrate-database"][f"{role}-password"] = password

    # Init containers first, in order, then the main container: as the kubelet runs them.
    _, runtime = parse_stages(DOCKER / "ops.Dockerfile")
    containers = containers_of(spec)
    assert [c["name"] for c in containers] == ["migrate", "sync-tools"]
    outputs = []
    for container in containers:
        environment = materialize_environment(
            resources, spec, container, secrets, tmp_path / container["name"]
        )
        arguments = container.get("args") or json.loads(runtime.all("CMD")[-1])
        outputs.append(await _run_ops_image(arguments, environment, tmp_path))
    assert "applied" in outputs[0]

    conn = await connect(owner_dsn)
    try:
        version = await conn.fetchval("SELECT max(version) FROM public.nemo_schema_migrations")
        verifiers = await conn.fetch(
            "SELECT rolname, rolpassword FROM pg_authid "
            "WHERE rolname IN ('nemo_context', 'nemo_toolplane')"
        )
        tools = await conn.fetchval("SELECT count(*) FROM toolplane.tools")
    finally:
        await conn.close()
    assert version == load_migrations()[-1].version
    assert len(verifiers) == 2
    assert all(row["rolpassword"].startswith("SCRAM-SHA-256$") for row in verifiers)
    assert tools == len(build_registry().versions())
