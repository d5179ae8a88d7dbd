"""Migration runner against a real PostgreSQL: ordering, idempotence, concurrency, checksums."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from nemo_core.db import connect, create_pool
from nemo_ops.migrate import (
    MIGRATIONS_TABLE,
    Migration,
    MigrationError,
    load_migrations,
    migrate,
    role_passwords_from_env,
)
from nemo_toolplane.rules.store import RulesStore
from nemo_toolplane.tokens import hash_token

DatabaseFactory = Callable[[], Awaitable[str]]


async def _recorded(dsn: str) -> list[tuple[int, str, str]]:
    conn = await connect(dsn)
    try:
        rows = await conn.fetch(
            f"SELECT version, name, checksum FROM {MIGRATIONS_TABLE} ORDER BY 1"
        )
        return [(row["version"], row["name"], row["checksum"]) for row in rows]
    finally:
        await conn.close()


async def _table_exists(dsn: str, name: str) -> bool:
    conn = await connect(dsn)
    try:
        return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", name))
    finally:
        await conn.close()


def test_migration_files_are_numbered_in_sequence() -> None:
    migrations = load_migrations()
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    assert migrations[0].filename == "0001_roles_and_schemas.sql"


def test_misnamed_and_duplicate_files_are_rejected(tmp_path: Path) -> None:
    (tmp_path / "0001_ok.sql").write_text("SELECT 1;")
    (tmp_path / "notes.txt").write_text("ignored")
    assert [m.name for m in load_migrations(tmp_path)] == ["ok"]
    (tmp_path / "2_missing_padding.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="NNNN_name"):
        load_migrations(tmp_path)
    (tmp_path / "2_missing_padding.sql").unlink()
    (tmp_path / "0001_again.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="version 0001"):
        load_migrations(tmp_path)


def test_checksum_ignores_line_endings(tmp_path: Path) -> None:
    (tmp_path / "0001_unix.sql").write_bytes(b"SELECT 1;\nSELECT 2;\n")
    (tmp_path / "0002_dos.sql").write_bytes(b"SELECT 1;\r\nSELECT 2;\r\n")
    unix, dos = load_migrations(tmp_path)
    assert unix.checksum == dos.checksum


async def test_second_run_applies_nothing(make_empty_database: DatabaseFactory) -> None:
    dsn = await make_empty_database()
    known = load_migrations()
    messages: list[str] = []

    first = await migrate(dsn, progress=messages.append)
    assert [m.version for m in first.applied] == [m.version for m in known]
    assert first.current_version == known[-1].version
    assert any("applied 0001_roles_and_schemas.sql" in message for message in messages)

    second = await migrate(dsn)
    assert second.applied == ()
    assert second.current_version == known[-1].version
    assert await _recorded(dsn) == [(m.version, m.name, m.checksum) for m in known]


async def test_concurrent_runs_apply_each_file_exactly_once(
    make_empty_database: DatabaseFactory,
) -> None:
    dsn = await make_empty_database()
    known = load_migrations()

    # Without the advisory lock, two runs would both CREATE SCHEMA and fail, or record twice.
    reports = await asyncio.gather(*(migrate(dsn) for _ in range(4)))

    applied = [m.version for report in reports for m in report.applied]
    assert sorted(applied) == [m.version for m in known]
    assert all(report.current_version == known[-1].version for report in reports)
    assert [row[0] for row in await _recorded(dsn)] == [m.version for m in known]


async def test_changed_applied_file_is_refused(make_empty_database: DatabaseFactory) -> None:
    dsn = await make_empty_database()
    known = load_migrations()
    await migrate(dsn)

    edited = [dataclasses.replace(known[1], sql=known[1].sql + "\n-- edited\n"), *known[2:]]
    extra = Migration(
        known[-1].version + 1, "after_edit", "CREATE TABLE public.after_edit (x int);"
    )
    with pytest.raises(MigrationError, match=r"0002_knowledge\.sql was changed"):
        await migrate(dsn, migrations=[known[0], *edited, extra])

    # Refused before applying anything, including the new file.
    assert not await _table_exists(dsn, "public.after_edit")
    assert len(await _recorded(dsn)) == len(known)


async def test_database_ahead_of_the_code_is_refused(make_empty_database: DatabaseFactory) -> None:
    dsn = await make_empty_database()
    known = load_migrations()
    await migrate(dsn)
    with pytest.raises(MigrationError, match="does not know"):
        await migrate(dsn, migrations=known[:-1])


async def test_each_file_runs_in_its_own_transaction(make_empty_database: DatabaseFactory) -> None:
    dsn = await make_empty_database()
    known = load_migrations()
    broken = Migration(
        known[-1].version + 1,
        "half_done",
        "CREATE TABLE public.half_done (x int);\nSELECT 1 / 0;\n",
    )
    with pytest.raises(asyncpg.DivisionByZeroError):
        await migrate(dsn, migrations=[*known, broken])

    # Earlier files stay applied; nothing of the failed one remains, so it can be fixed and rerun.
    assert [row[0] for row in await _recorded(dsn)] == [m.version for m in known]
    assert not await _table_exists(dsn, "public.half_done")
    fixed = dataclasses.replace(broken, sql="CREATE TABLE public.half_done (x int);\n")
    report = await migrate(dsn, migrations=[*known, fixed])
    assert [m.name for m in report.applied] == ["half_done"]
    assert await _table_exists(dsn, "public.half_done")


def test_role_passwords_come_from_env_or_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "toolplane-password"
    secret_file.write_text("from-a-file\n")
    environ = {
        "NEMO_DB_CONTEXT_PASSWORD": "from-env",
        "NEMO_DB_TOOLPLANE_PASSWORD_FILE": str(secret_file),
    }
    assert role_passwords_from_env(environ) == {
        "nemo_context": "from-env",
        "nemo_toolplane": "from-a-file",
    }
    assert role_passwords_from_env({"NEMO_DB_CONTEXT_PASSWORD": ""}) == {}


@pytest.mark.skipif(
    bool(os.environ.get("DATABASE_URL")),
    reason="changes a cluster-wide role password; only on the embedded server",
)
async def test_role_password_is_stored_as_a_verifier_of_that_password(owner_dsn: str) -> None:
    await migrate(owner_dsn, role_passwords={"nemo_toolplane": "s3cret-for-test"})
    conn = await connect(owner_dsn)
    try:
        stored = await conn.fetchval(
            "SELECT rolpassword FROM pg_authid WHERE rolname = 'nemo_toolplane'"
        )
    finally:
        await conn.close()
    # PostgreSQL stores an unrecognised string as a password of its own, hashed with a new salt;
    # recomputing the keys from the stored salt proves it kept our verifier of this password.
    method, _, rest = stored.partition("$")
    assert method == "SCRAM-SHA-256"
    iteration_salt, _, keys = rest.partition("$")
    iterations, _, salt = iteration_salt.partition(":")
    stored_key, _, server_key = keys.partition(":")
    salted = hashlib.pbkdf2_hmac(
        "sha256", b"s3cret-for-test", base64.b64decode(salt), int(iterations)
    )
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    assert base64.b64decode(stored_key) == hashlib.sha256(client_key).digest()
    assert base64.b64decode(server_key) == hmac.digest(salted, b"Server Key", "sha256")


async def test_keys_too_plain_for_the_identifier_gate_stop_the_migration(
    make_empty_database: DatabaseFactory,
) -> None:
    dsn = await make_empty_database()
    known = load_migrations()
    [check] = [m for m in known if m.name == "unambiguous_keys"]
    before = [m for m in known if m.version < check.version]
    await migrate(dsn, migrations=before)
    conn = await connect(dsn)
    try:
        await conn.execute("INSERT INTO learning.families (id, name) VALUES ('35', 'x')")
        await conn.execute(
            "INSERT INTO learning.learners (id, family_id, grade) VALUES ('8', '35', 8)"
        )
    finally:
        await conn.close()
    with pytest.raises(asyncpg.RaiseError, match="2 user, family or learner keys are too short"):
        await migrate(dsn, migrations=known)


@pytest.mark.parametrize(
    ("table", "row"),
    [
        ("learning.families", "('F-1', 'x')"),
        ("learning.families", "('35', 'x')"),
        ("learning.users", "('student', 'learner')"),
        ("learning.users", "('12345678', 'parent')"),
    ],
)
async def test_the_database_refuses_keys_too_plain_for_the_identifier_gate(
    owner_dsn: str, table: str, row: str
) -> None:
    columns = "(id, name)" if table == "learning.families" else "(id, role)"
    conn = await connect(owner_dsn)
    try:
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute(f"INSERT INTO {table} {columns} VALUES {row}")
    finally:
        await conn.close()


async def test_legacy_agent_tokens_keep_working_as_unbound_agent_tokens(
    make_empty_database: DatabaseFactory,
) -> None:
    dsn = await make_empty_database()
    known = load_migrations()
    [move] = [m for m in known if m.name == "toolplane_legacy_agent_tokens"]
    await migrate(dsn, migrations=[m for m in known if m.version < move.version])
    legacy = {agent: f"nemo_at_{secrets.token_urlsafe(32)}" for agent in ("agent-on", "agent-off")}
    conn = await connect(dsn)
    try:
        for agent_id, status in (
            ("agent-on", "active"),
            ("agent-off", "disabled"),
            ("agent-new", "active"),
        ):
            token = legacy.get(agent_id)
            await conn.execute(
                "INSERT INTO toolplane.agents (id, name, status, token_hash) "
                "VALUES ($1, $1, $2, $3)",
                agent_id,
                status,
                hash_token(token) if token else None,
            )
        await migrate(dsn, migrations=known)
        moved = await conn.fetch(
            "SELECT agent_id, user_id, revoked_at FROM toolplane.agent_tokens ORDER BY agent_id"
        )
        assert [tuple(row) for row in moved] == [
            ("agent-off", None, None),
            ("agent-on", None, None),
        ]
        assert not await conn.fetchval(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'toolplane' "
            "AND table_name = 'agents' AND column_name = 'token_hash'"
        )
    finally:
        await conn.close()
    pool = await create_pool(dsn, max_size=1)
    try:
        store = RulesStore(pool)
        # The active agent's token still authenticates it, unbound, now under a token id.
        agent = await store.load(legacy["agent-on"])
        assert agent is not None
        assert (agent.identity.agent_id, agent.identity.bound_user_id) == ("agent-on", None)
        assert agent.identity.token_id
        # A disabled agent's token stays refused, as it was.
        assert await store.load(legacy["agent-off"]) is None
    finally:
        await pool.close()
