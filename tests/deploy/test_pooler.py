"""The pooler of the prod overlay runs as rendered: its pgbouncer.ini and pool.ini (ConfigMaps)
and the Secret deploy/k8s/create_secrets.py writes, mounted as the kubelet would, start a real
PgBouncer, and each service role's `pooled-url` from its own Secret reaches the database through
it in transaction mode, with the learner binding holding.

The test changes only what a test machine must: the mount paths (to a temporary directory), the
listening address (loopback, a free port), TLS to PostgreSQL (the test server has none) and, in
the pooled URLs, the Service's name (to that address)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nemo_core.db import connect, learner_transaction
from nemo_testing.pgbouncer import pgbouncer_process
from nemo_testing.ports import free_port
from tests.deploy.deploy_manifests import (
    by_kind,
    decoded,
    load_create_secrets,
    pod_spec,
    rendered,
    the,
)

create_secrets = load_create_secrets()


def _mounted(
    resources: list[dict[str, Any]], secrets: dict[str, dict[str, str]], root: Path
) -> dict[str, Path]:
    """The pooler's volumes written under ``root`` as the kubelet would: mount path -> directory."""
    spec = pod_spec(the(resources, "Deployment", "nemo-pgbouncer"))
    [container] = spec["containers"]
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    config_maps = by_kind(resources, "ConfigMap")
    moved = {}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        directory = root / mount["name"]
        directory.mkdir(parents=True)
        if "projected" in volume:
            for source in volume["projected"]["sources"]:
                data = config_maps[source["configMap"]["name"]]["data"]
                for key, text in data.items():
                    (directory / key).write_text(text, encoding="utf-8")
        else:
            data = secrets[volume["secret"]["secretName"]]
            for item in volume["secret"]["items"]:
                (directory / item["path"]).write_text(data[item["key"]], encoding="utf-8")
        moved[mount["mountPath"]] = directory
    return moved


def _prepared(owner_dsn: str, root: Path) -> tuple[Path, int, dict[str, dict[str, str]]]:
    """The generated Secrets and the rendered pooler's files under ``root``, its configuration
    changed only as the module says; the configuration file, its port, and the Secrets."""
    manifests, _ = create_secrets.build_secrets(
        namespace="nemo",
        owner_database_url=owner_dsn,
        pseudonym_key="0123456789abcdef" * 4,
        identifier_key="0f1e2d3c4b5a6978" * 4,
        snapshot_master_key="fedcba9876543210" * 4,
        llm_api_key="",
        embedding_api_key="",
    )
    secrets = {m["metadata"]["name"]: decoded(m) for m in manifests}
    moved = _mounted(rendered("python", "prod"), secrets, root)
    ini = moved["/etc/pgbouncer"] / "pgbouncer.ini"
    text = ini.read_text(encoding="utf-8")
    for mount_path, directory in moved.items():
        text = text.replace(mount_path + "/", f"{directory}/")
    port = free_port()
    text = re.sub(r"(?m)^listen_addr = .*$", "listen_addr = 127.0.0.1", text)
    text = re.sub(r"(?m)^listen_port = .*$", f"listen_port = {port}", text)
    text = re.sub(r"(?m)^server_tls_sslmode = .*$", "server_tls_sslmode = disable", text)
    ini.write_text(text, encoding="utf-8")
    return ini, port, secrets


async def test_the_rendered_pooler_serves_the_service_roles(owner_dsn: str, tmp_path: Path) -> None:
    ini, port, secrets = _prepared(owner_dsn, tmp_path)
    files = [tmp_path, *tmp_path.rglob("*")]  # noqa: ASYNC240 - a few files, once
    address = f"127.0.0.1:{port}"
    async with pgbouncer_process(ini, port, server_dsn=owner_dsn, passwords={}, files=files):
        for service, role in (("context", "nemo_context"), ("toolplane", "nemo_toolplane")):
            pooled = secrets[f"nemo-{service}-database"]["pooled-url"]
            assert create_secrets.DEFAULT_POOLER_ADDRESS in pooled
            conn = await connect(
                pooled.replace(create_secrets.DEFAULT_POOLER_ADDRESS, address),
                transaction_pooling=True,
            )
            try:
                assert await conn.fetchval("SELECT current_user") == role
                if service == "context":
                    async with learner_transaction(conn, ["L-2041-1"], readonly=True):
                        seen = await conn.fetch("SELECT DISTINCT learner_id FROM learning.mastery")
                    assert [row["learner_id"] for row in seen] == ["L-2041-1"]
                    assert await conn.fetchval("SELECT count(*) FROM learning.mastery") == 0
            finally:
                await conn.close()
