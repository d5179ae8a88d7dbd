#!/usr/bin/env python3
"""Print the Secrets the Nemo manifests reference, as one Kubernetes List (JSON) for
`kubectl apply -f -`. Needs only Python 3.11; nothing is sent anywhere.

    python3 deploy/k8s/create_secrets.py --namespace nemo \\
        --owner-database-url 'postgresql://nemo_owner:...@db.internal:5432/nemo?sslmode=require' \\
        --pseudonym-key-file pseudonym.key --identifier-key-file identifier.key \\
        --snapshot-master-key-file snapshot-master.key \\
        --llm-api-key-file llm.key --embedding-api-key-file embedding.key \\
        --caller-tokens-out caller-tokens.json | kubectl apply -f -

Every run generates new login passwords for the nemo_context and nemo_toolplane roles and new
caller tokens. Each service's database Secret holds two URLs of its role: `url`, straight to
PostgreSQL, and `pooled-url`, through the PgBouncer of the pgbouncer component
(--pooler-address); the Secret nemo-pgbouncer gives the pooler the same passwords and the
database's address. To rotate them, follow "Rotate service credentials" in
docs/operations/deploy.md: applying a run's output at once cuts callers off until every pod
has restarted. The pseudonym key, the identifier key and the snapshot master key are never
generated here: the first decides every learner_ref, the second's digest the database must
hold (docs/operations/identifier-key.md), the third unlocks every snapshot, and each must
outlive runs of this script (see docs/operations/pseudonym-key.md and
docs/operations/learner-rights.md). The tokens of callers outside the namespace (internal
services, operators, the audit reader) are written to --caller-tokens-out, readable by the
owner only, to hand over through your secret store.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import secrets
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

#: Who calls whom: every caller identity and the services that accept it (their ACLs).
CALLER_IDENTITIES: Mapping[str, tuple[str, ...]] = {
    "gateway": ("context",),
    "toolplane": ("context",),
    "audit": ("context",),
    "internal": ("gateway", "toolplane"),
    "platform": ("toolplane", "context"),
    "operator": ("toolplane",),
    "console": ("toolplane", "context", "gateway"),
}

#: Services that call other services, with the identity their client token proves.
CLIENT_IDENTITIES: Mapping[str, str] = {
    "gateway": "gateway",
    "toolplane": "toolplane",
    "console": "console",
}

SERVICES: tuple[str, ...] = ("context", "gateway", "toolplane")

#: Database roles created by the migrations, by the service that logs in with them.
SERVICE_ROLES: Mapping[str, str] = {"context": "nemo_context", "toolplane": "nemo_toolplane"}

MIN_PSEUDONYM_KEY_LENGTH = 32
MIN_IDENTIFIER_KEY_LENGTH = 32

#: The pooler's Service (deploy/k8s/components/pgbouncer), as the services reach it.
DEFAULT_POOLER_ADDRESS = "nemo-pgbouncer:6432"


class SecretsError(Exception):
    """An input is missing or unusable."""


def _random_token() -> str:
    return secrets.token_urlsafe(32)


def _read_secret_file(path: Path) -> str:
    # Secret files often end with a newline that is not part of the secret.
    return path.read_text(encoding="utf-8").strip()


def role_database_url(owner_url: str, role: str, password: str) -> str:
    """``owner_url`` with the user and password of ``role`` (host, database, options kept)."""
    parts = urlsplit(owner_url)
    if parts.scheme not in {"postgresql", "postgres"}:
        raise SecretsError("the owner database URL must be postgresql://user:password@host/db")
    # No host is allowed: libpq then takes it from the options (?host=/socket/dir).
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port else ""
    netloc = f"{quote(role, safe='')}:{quote(password, safe='')}@{host}{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def pooled_database_url(owner_url: str, role: str, password: str, pooler_address: str) -> str:
    """The URL of ``role`` through the pooler at ``pooler_address`` (host:port) to the owner's
    database. Plain TCP: the pooler takes no TLS from clients inside the namespace (it uses TLS
    to PostgreSQL)."""
    database = urlsplit(owner_url).path or "/postgres"
    netloc = f"{quote(role, safe='')}:{quote(password, safe='')}@{pooler_address}"
    return urlunsplit(("postgresql", netloc, database, "sslmode=disable", ""))


def _auth_field(value: str) -> str:
    # PgBouncer's auth file: each field in double quotes, a quote inside doubled.
    return '"' + value.replace('"', '""') + '"'


def pooler_files(owner_url: str, passwords: Mapping[str, str]) -> dict[str, str]:
    """The pooler's auth file (each service role and its password) and its [databases] section
    (the owner's host, port and database, which the pooler logs in to as the client's role)."""
    parts = urlsplit(owner_url)
    # A host in the URL, or libpq's host option (a Unix socket directory) in its query.
    host = parts.hostname or parse_qs(parts.query).get("host", [""])[0]
    if not host:
        raise SecretsError("the owner database URL needs a host for the pooler to reach")
    database = parts.path.lstrip("/") or "postgres"
    if not re.fullmatch(r"[A-Za-z0-9_]+", database):
        raise SecretsError(
            f"the database name {database!r} is not a plain name (letters, digits, _), "
            "which the pooler's configuration needs"
        )
    userlist = "".join(
        f"{_auth_field(SERVICE_ROLES[service])} {_auth_field(password)}\n"
        for service, password in sorted(passwords.items())
    )
    databases = (
        f"[databases]\n{database} = host={host} port={parts.port or 5432} dbname={database}\n"
    )
    return {"userlist.txt": userlist, "databases.ini": databases}


def _secret(name: str, namespace: str, data: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "nemo-ai-plane"},
        },
        "type": "Opaque",
        "data": {
            key: base64.b64encode(value.encode("utf-8")).decode("ascii")
            for key, value in data.items()
        },
    }


def build_secrets(
    *,
    namespace: str,
    owner_database_url: str,
    pseudonym_key: str,
    identifier_key: str,
    snapshot_master_key: str,
    llm_api_key: str,
    embedding_api_key: str,
    pooler_address: str = DEFAULT_POOLER_ADDRESS,
    console_client_secret: str = "",
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The Secrets of ``namespace`` and the caller tokens generated for them."""
    for name, key, minimum in (
        ("pseudonym key", pseudonym_key, MIN_PSEUDONYM_KEY_LENGTH),
        ("identifier key", identifier_key, MIN_IDENTIFIER_KEY_LENGTH),
        ("snapshot master key", snapshot_master_key, MIN_PSEUDONYM_KEY_LENGTH),
    ):
        if len(key) < minimum:
            raise SecretsError(f"the {name} must be at least {minimum} characters")
    passwords = {service: _random_token() for service in SERVICE_ROLES}
    tokens = {identity: _random_token() for identity in CALLER_IDENTITIES}

    def accepted_by(service: str) -> str:
        accepted = {
            identity: tokens[identity]
            for identity, services in CALLER_IDENTITIES.items()
            if service in services
        }
        return json.dumps(accepted, sort_keys=True)

    manifests = [
        _secret(
            "nemo-migrate-database",
            namespace,
            {
                "url": owner_database_url,
                "context-password": passwords["context"],
                "toolplane-password": passwords["toolplane"],
            },
        ),
        *(
            _secret(
                f"nemo-{service}-database",
                namespace,
                {
                    "url": role_database_url(owner_database_url, role, passwords[service]),
                    "pooled-url": pooled_database_url(
                        owner_database_url, role, passwords[service], pooler_address
                    ),
                },
            )
            for service, role in SERVICE_ROLES.items()
        ),
        _secret("nemo-pgbouncer", namespace, pooler_files(owner_database_url, passwords)),
        _secret("nemo-pseudonym-key", namespace, {"key": pseudonym_key}),
        _secret("nemo-identifier-key", namespace, {"key": identifier_key}),
        _secret("nemo-snapshot-master-key", namespace, {"key": snapshot_master_key}),
        _secret(
            "nemo-model-keys",
            namespace,
            {"llm-api-key": llm_api_key, "embedding-api-key": embedding_api_key},
        ),
        *(
            _secret(f"nemo-{service}-callers", namespace, {"tokens.json": accepted_by(service)})
            for service in SERVICES
        ),
        *(
            _secret(f"nemo-{service}-client-token", namespace, {"token": tokens[identity]})
            for service, identity in CLIENT_IDENTITIES.items()
        ),
        # The console's client secret at the OpenID provider (issued there), and the key of its
        # session cookies (generated; rotate by prepending a new key: all of them decrypt).
        _secret("nemo-console-oidc", namespace, {"client-secret": console_client_secret}),
        _secret("nemo-console-session", namespace, {"keys": secrets.token_urlsafe(48)}),
    ]
    return manifests, tokens


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Print the Secrets of one Nemo namespace as a Kubernetes List (JSON)."
    )
    parser.add_argument("--namespace", required=True, help="namespace of the overlay")
    parser.add_argument(
        "--owner-database-url",
        default=os.environ.get("NEMO_OWNER_DATABASE_URL"),
        help="postgresql:// URL of the role that owns the schemas, used by the migration Job; "
        "the service roles' URLs reuse its host, database and options "
        "(default: $NEMO_OWNER_DATABASE_URL)",
    )
    parser.add_argument(
        "--pseudonym-key-file",
        type=Path,
        required=True,
        help=f"file holding the pseudonym key (at least {MIN_PSEUDONYM_KEY_LENGTH} characters)",
    )
    parser.add_argument(
        "--identifier-key-file",
        type=Path,
        required=True,
        help="file holding the identifier key (at least "
        f"{MIN_IDENTIFIER_KEY_LENGTH} characters; its digest is registered in the database)",
    )
    parser.add_argument(
        "--snapshot-master-key-file",
        type=Path,
        required=True,
        help="file holding the snapshot master key, which wraps every learner's snapshot key "
        f"(at least {MIN_PSEUDONYM_KEY_LENGTH} characters)",
    )
    parser.add_argument("--llm-api-key-file", type=Path, help="file holding the LLM API key")
    parser.add_argument(
        "--embedding-api-key-file", type=Path, help="file holding the embedding API key"
    )
    parser.add_argument(
        "--pooler-address",
        default=DEFAULT_POOLER_ADDRESS,
        help="host:port of the PgBouncer Service the pooled URLs lead to "
        f"(default {DEFAULT_POOLER_ADDRESS})",
    )
    parser.add_argument(
        "--console-client-secret-file",
        type=Path,
        help="file holding the console's client secret at the platform's OpenID provider",
    )
    parser.add_argument(
        "--caller-tokens-out",
        type=Path,
        required=True,
        help="where to write the generated caller tokens (JSON, mode 0600)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        if not args.owner_database_url:
            raise SecretsError("pass --owner-database-url or set NEMO_OWNER_DATABASE_URL")
        manifests, tokens = build_secrets(
            namespace=args.namespace,
            owner_database_url=args.owner_database_url,
            pseudonym_key=_read_secret_file(args.pseudonym_key_file),
            identifier_key=_read_secret_file(args.identifier_key_file),
            snapshot_master_key=_read_secret_file(args.snapshot_master_key_file),
            # No key is fine for the baseline provider and for local model servers.
            llm_api_key=_read_secret_file(args.llm_api_key_file) if args.llm_api_key_file else "",
            embedding_api_key=(
                _read_secret_file(args.embedding_api_key_file)
                if args.embedding_api_key_file
                else ""
            ),
            pooler_address=args.pooler_address,
            console_client_secret=(
                _read_secret_file(args.console_client_secret_file)
                if args.console_client_secret_file
                else ""
            ),
        )
    except (SecretsError, OSError) as error:
        print(f"create_secrets: error: {error}", file=sys.stderr)
        return 1
    handed_over = {
        identity: token
        for identity, token in tokens.items()
        if identity not in CLIENT_IDENTITIES.values()
    }
    descriptor = os.open(args.caller_tokens_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(handed_over, handle, indent=2, sort_keys=True)
        handle.write("\n")
    json.dump({"apiVersion": "v1", "kind": "List", "items": manifests}, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
