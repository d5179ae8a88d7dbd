"""Secrets: referenced by name, never inlined, each mounted only where it is needed, and all
of them produced consistently by deploy/k8s/create_secrets.py."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from nemo_context.acl import ACL as CONTEXT_ACL
from nemo_gateway.acl import ACL as GATEWAY_ACL
from nemo_ops.dev import CALLER_IDENTITIES as DEV_CALLER_IDENTITIES
from nemo_toolplane.acl import ACL as TOOLPLANE_ACL
from tests.deploy.deploy_manifests import (
    K8S,
    OVERLAYS,
    RENDERERS,
    all_containers,
    by_kind,
    decoded,
    load_create_secrets,
    optional_secrets,
    pod_spec,
    rendered,
    secret_references,
    workloads,
)

create_secrets = load_create_secrets()

MODEL_KEY_SECRETS = {"nemo-model-keys"}

#: Each workload and exactly the Secrets its pods may see.
EXPECTED_SECRETS: dict[str, set[str]] = {
    # Database role nemo_context, pseudonym, identifier and snapshot master keys, accepted
    # caller tokens,
    # optional S3 keys.
    "nemo-context": {
        "nemo-context-database",
        "nemo-pseudonym-key",
        "nemo-identifier-key",
        "nemo-snapshot-master-key",
        "nemo-context-callers",
        "nemo-context-s3",
    },
    # Model keys, accepted caller tokens, its own token for calling the context service.
    "nemo-gateway": {"nemo-model-keys", "nemo-gateway-callers", "nemo-gateway-client-token"},
    # Database role nemo_toolplane, accepted caller tokens, its own token for the context.
    "nemo-toolplane": {
        "nemo-toolplane-database",
        "nemo-toolplane-callers",
        "nemo-toolplane-client-token",
    },
    # Its own token for calling the services, its client secret at the OpenID provider, the key
    # of its session cookies; no database credential.
    "nemo-console": {"nemo-console-client-token", "nemo-console-oidc", "nemo-console-session"},
    # The owner role and the two role passwords it sets.
    "nemo-migrate": {"nemo-migrate-database"},
    # The owner role (only its URL), the snapshot bucket's keys, and the keys the context
    # settings need to load.
    "nemo-purge": {
        "nemo-migrate-database",
        "nemo-context-s3",
        "nemo-pseudonym-key",
        "nemo-snapshot-master-key",
    },
}
#: The pooler of the pgbouncer component (prod): the service roles' passwords and the database.
POOLER_SECRETS: dict[str, set[str]] = {"nemo-pgbouncer": {"nemo-pgbouncer"}}
#: Overlays whose services reach PostgreSQL through the pooler.
POOLED_OVERLAYS = {"prod"}

# Names of settings that hold a secret: they may only point at a mounted file (``..._FILE``).
_SECRET_SETTING = re.compile(r"(PASSWORD|API_KEY|TOKENS?|SECRET(_ACCESS_KEY)?|DATABASE_URL|_KEY)$")

renderers = pytest.mark.parametrize("renderer", RENDERERS)
overlays = pytest.mark.parametrize("overlay", sorted(OVERLAYS))


def _references(resources: list[dict[str, Any]]) -> dict[str, set[str]]:
    return {
        name: set(secret_references(pod_spec(workload)))
        for name, workload in workloads(resources).items()
    }


@renderers
@overlays
def test_each_workload_sees_exactly_its_secrets(renderer: str, overlay: str) -> None:
    # The local model server holds no secret at all.
    extra: dict[str, set[str]] = {"nemo-local-model": set()} if overlay == "dev-local-model" else {}
    if overlay in POOLED_OVERLAYS:
        extra |= POOLER_SECRETS
    assert _references(rendered(renderer, overlay)) == EXPECTED_SECRETS | extra


@renderers
@pytest.mark.parametrize("kustomization", [*sorted(OVERLAYS), "observability"])
def test_only_the_gateway_sees_model_keys(renderer: str, kustomization: str) -> None:
    seeing = {
        name
        for name, secrets in _references(rendered(renderer, kustomization)).items()
        if secrets & MODEL_KEY_SECRETS
    }
    assert seeing == ({"nemo-gateway"} if kustomization in OVERLAYS else set())


@renderers
@pytest.mark.parametrize("kustomization", [*sorted(OVERLAYS), "observability", "base"])
def test_no_secret_value_is_written_into_the_manifests(renderer: str, kustomization: str) -> None:
    resources = rendered(renderer, kustomization)
    assert by_kind(resources, "Secret") == {}
    settings = [
        name
        for config_map in by_kind(resources, "ConfigMap").values()
        for name in config_map["data"]
    ] + [
        variable["name"]
        for _, _, container in all_containers(resources)
        for variable in container.get("env", [])
        if "value" in variable
    ]
    inlined = [name for name in settings if _SECRET_SETTING.search(name)]
    assert inlined == []


def _generated(namespace: str = "nemo") -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    manifests, tokens = create_secrets.build_secrets(
        namespace=namespace,
        owner_database_url="postgresql://nemo_owner:owner%40pw@db.internal:5432/nemo?sslmode=require",
        pseudonym_key="k" * 64,
        identifier_key="i" * 32,
        snapshot_master_key="m" * 64,
        llm_api_key="llm-key",
        embedding_api_key="embedding-key",
    )
    assert {m["metadata"]["namespace"] for m in manifests} == {namespace}
    return {m["metadata"]["name"]: decoded(m) for m in manifests}, tokens


@renderers
@overlays
def test_generated_secrets_hold_every_key_the_manifests_use(renderer: str, overlay: str) -> None:
    secrets, _ = _generated()
    needed: dict[str, set[str] | None] = {}
    optional: set[str] = set()
    for workload in workloads(rendered(renderer, overlay)).values():
        needed |= secret_references(pod_spec(workload))
        optional |= optional_secrets(pod_spec(workload))
    # Optional ones (static S3 keys) are created by hand when workload identity is not used; the
    # pooler's is generated for every namespace, used where the overlay runs the pooler.
    unused = set() if overlay in POOLED_OVERLAYS else set(POOLER_SECRETS)
    assert set(secrets) == set(needed) - optional | unused
    for name, keys in needed.items():
        if keys is not None and name not in optional:
            assert keys <= set(secrets[name]), name


def test_caller_tokens_link_each_caller_to_the_services_that_accept_it() -> None:
    secrets, tokens = _generated()
    accepted = {
        service: json.loads(secrets[f"nemo-{service}-callers"]["tokens.json"])
        for service in ("context", "gateway", "toolplane")
    }
    assert set(accepted["context"]) == set(CONTEXT_ACL.identities)
    assert set(accepted["gateway"]) == set(GATEWAY_ACL.identities)
    assert set(accepted["toolplane"]) == set(TOOLPLANE_ACL.identities)
    # A service's client token is the one its callee accepts for it.
    assert secrets["nemo-gateway-client-token"]["token"] == accepted["context"]["gateway"]
    assert secrets["nemo-toolplane-client-token"]["token"] == accepted["context"]["toolplane"]
    assert accepted["gateway"]["internal"] == accepted["toolplane"]["internal"]
    assert len(set(tokens.values())) == len(tokens)
    assert all(len(token) >= 32 for token in tokens.values())


def test_the_caller_table_is_the_dev_stacks() -> None:
    assert create_secrets.CALLER_IDENTITIES == DEV_CALLER_IDENTITIES


def test_service_roles_reuse_the_owners_host_database_and_options() -> None:
    secrets, _ = _generated()
    owner = urlsplit(secrets["nemo-migrate-database"]["url"])
    for service, role in (("context", "nemo_context"), ("toolplane", "nemo_toolplane")):
        url = urlsplit(secrets[f"nemo-{service}-database"]["url"])
        password = secrets["nemo-migrate-database"][f"{service}-password"]
        assert (url.username, url.password) == (role, password)
        assert (url.hostname, url.port, url.path, url.query) == (
            owner.hostname,
            owner.port,
            owner.path,
            owner.query,
        )
    ipv6 = create_secrets.role_database_url("postgresql://o:p@[fd00::5]:5432/nemo", "r", "a/b")
    assert ipv6 == "postgresql://r:a%2Fb@[fd00::5]:5432/nemo"


def test_every_run_rotates_passwords_and_tokens_but_keeps_the_pseudonym_key() -> None:
    first, first_tokens = _generated()
    second, second_tokens = _generated()
    assert first["nemo-pseudonym-key"] == second["nemo-pseudonym-key"]
    assert first["nemo-identifier-key"] == second["nemo-identifier-key"]
    assert set(first_tokens.values()).isdisjoint(second_tokens.values())
    assert (
        first["nemo-migrate-database"]["context-password"]
        != (second["nemo-migrate-database"]["context-password"])
    )


def _run_script(tmp_path: Path, key: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pseudonym.key").write_text(key + "\n")
    (tmp_path / "identifier.key").write_text("i" * 48 + "\n")
    (tmp_path / "llm.key").write_text("llm-secret\n")
    return subprocess.run(
        [
            sys.executable,
            str(K8S / "create_secrets.py"),
            "--namespace",
            "nemo-dev",
            "--owner-database-url",
            "postgresql://owner:pw@db:5432/nemo",
            "--pseudonym-key-file",
            str(tmp_path / "pseudonym.key"),
            "--identifier-key-file",
            str(tmp_path / "identifier.key"),
            "--snapshot-master-key-file",
            str(tmp_path / "pseudonym.key"),
            "--llm-api-key-file",
            str(tmp_path / "llm.key"),
            "--caller-tokens-out",
            str(tmp_path / "tokens.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_script_prints_a_list_and_keeps_the_handed_over_tokens_private(
    tmp_path: Path,
) -> None:
    result = _run_script(tmp_path, "p" * 40)
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    assert listing["kind"] == "List"
    secrets = {item["metadata"]["name"]: decoded(item) for item in listing["items"]}
    assert secrets["nemo-pseudonym-key"] == {"key": "p" * 40}
    assert secrets["nemo-identifier-key"] == {"key": "i" * 48}
    assert secrets["nemo-model-keys"] == {"llm-api-key": "llm-secret", "embedding-api-key": ""}
    tokens_file = tmp_path / "tokens.json"
    assert stat.S_IMODE(tokens_file.stat().st_mode) == 0o600
    handed_over = json.loads(tokens_file.read_text())
    # Tokens of callers outside the namespace; the services' own stay in their Secrets.
    assert set(handed_over) == {"internal", "platform", "operator", "audit"}
    assert (
        handed_over["internal"]
        == json.loads(secrets["nemo-gateway-callers"]["tokens.json"])["internal"]
    )


def test_the_script_refuses_a_short_pseudonym_key(tmp_path: Path) -> None:
    result = _run_script(tmp_path, "short")
    assert result.returncode == 1
    assert "at least 32 characters" in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "tokens.json").exists()


def test_the_pooled_urls_and_the_pooler_share_each_roles_password() -> None:
    secrets, _ = _generated()
    owner = urlsplit(secrets["nemo-migrate-database"]["url"])
    userlist = secrets["nemo-pgbouncer"]["userlist.txt"].splitlines()
    for service, role in (("context", "nemo_context"), ("toolplane", "nemo_toolplane")):
        direct = urlsplit(secrets[f"nemo-{service}-database"]["url"])
        pooled = urlsplit(secrets[f"nemo-{service}-database"]["pooled-url"])
        assert (pooled.username, pooled.password) == (direct.username, direct.password)
        assert f"{pooled.hostname}:{pooled.port}" == create_secrets.DEFAULT_POOLER_ADDRESS
        # The pooler takes no TLS from clients; the database is the owner's.
        assert (pooled.path, pooled.query) == (owner.path, "sslmode=disable")
        assert f'"{role}" "{direct.password}"' in userlist
    assert len(userlist) == 2
    assert secrets["nemo-pgbouncer"]["databases.ini"] == (
        "[databases]\nnemo = host=db.internal port=5432 dbname=nemo\n"
    )


def test_a_database_name_the_pooler_cannot_hold_is_refused() -> None:
    with pytest.raises(create_secrets.SecretsError, match="plain name"):
        create_secrets.pooler_files("postgresql://o:p@db/nemo;drop", {"context": "x"})
