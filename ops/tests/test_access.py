"""The database's access model, checked by connecting as each service role.

The tool plane's role has no privilege on learner data or knowledge; the context role cannot
select identifier columns or verbatim answers, and row-level security shows it only the learners
bound to its transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest

from nemo_core.db import connect, learner_transaction

IDENTIFIER_COLUMNS = {
    "learning.learners": (
        "display_name", "first_name", "last_name", "birth_date", "email", "phone", "address",
        "school_name", "avatar_url", "facebook_url", "links_json", "photo_url",
    ),
    "learning.users": ("display_name", "email", "phone"),
    "learning.families": ("name",),
    "learning.evidence": ("payload_json",),
}  # fmt: skip

LEARNER_KEYED = {
    "learning.learners": "id",
    "learning.guardians": "learner_id",
    "learning.mentor_assignments": "learner_id",
    "learning.mastery": "learner_id",
    "learning.evidence": "learner_id",
    "learning.goals": "learner_id",
    "learning.retention": "learner_id",
    "learning.learner_model_versions": "learner_id",
    "learning.chat_sessions": "learner_id",
    "learning.chat_messages": "learner_id",
    "learning.conversation_state": "learner_id",
    "learning.conversation_summaries": "learner_id",
}


@asynccontextmanager
async def rolled_back(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """A transaction that is always rolled back, so tests leave the shared database as it was."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        yield
    finally:
        await transaction.rollback()


class _RolledBackError(Exception):
    """Raised inside a transaction to roll it back once its writes succeeded."""


@pytest.fixture
async def owner(owner_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await connect(owner_dsn)
    yield conn
    await conn.close()


@pytest.fixture
async def context(context_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await connect(context_dsn)
    yield conn
    await conn.close()


@pytest.fixture
async def toolplane(toolplane_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await connect(toolplane_dsn)
    yield conn
    await conn.close()


async def _tables(conn: asyncpg.Connection, schema: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables "
        "WHERE schemaname = $1 ORDER BY tablename",
        schema,
    )
    return [row["name"] for row in rows]


# The tool plane's role ----------------------------------------------------------------------


@pytest.mark.parametrize("schema", ["learning", "knowledge"])
async def test_toolplane_role_cannot_select_any_learning_or_knowledge_table(
    owner: asyncpg.Connection, toolplane: asyncpg.Connection, schema: str
) -> None:
    tables = await _tables(owner, schema)
    assert len(tables) >= 3
    for table in tables:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await toolplane.fetch(f"SELECT * FROM {table} LIMIT 1")


@pytest.mark.parametrize("schema", ["learning", "knowledge"])
async def test_toolplane_role_holds_no_privilege_at_all_there(
    owner: asyncpg.Connection, schema: str
) -> None:
    # Privileges are checked directly, so a grant hidden behind the missing USAGE still shows.
    assert not await owner.fetchval(
        "SELECT has_schema_privilege('nemo_toolplane', $1, 'USAGE, CREATE')", schema
    )
    leaks = await owner.fetch(
        """
        SELECT c.oid::regclass::text AS name FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relkind IN ('r', 'S', 'v', 'm')
          AND (has_table_privilege('nemo_toolplane', c.oid,
                   'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
               OR has_any_column_privilege('nemo_toolplane', c.oid, 'SELECT, INSERT, UPDATE'))
        """,
        schema,
    )
    assert leaks == []
    functions = await owner.fetch(
        """
        SELECT p.oid::regprocedure::text AS name FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = $1 AND has_function_privilege('nemo_toolplane', p.oid, 'EXECUTE')
        """,
        schema,
    )
    assert functions == []


async def test_toolplane_role_works_on_its_own_schema(
    owner: asyncpg.Connection, toolplane: asyncpg.Connection
) -> None:
    for table in await _tables(owner, "toolplane"):
        await toolplane.fetch(f"SELECT * FROM {table} LIMIT 1")
    async with rolled_back(toolplane):
        audit_id = await toolplane.fetchval(
            "INSERT INTO toolplane.audit_logs (request_id, agent_id, tool_id, resource,"
            " decision, status, error_code, duration_ms, environment)"
            " VALUES ('REQ-test', 'learning-agent', 'learner.get_profile:v1', 'learner:L-2041-1',"
            " 'deny', 'denied', 'AUTHORIZATION_ERROR', 1.5, 'development') RETURNING id"
        )
        await toolplane.execute(
            "INSERT INTO toolplane.grants (agent_id, tool_pattern, resource_scope, permission)"
            " VALUES ('research-agent', 'learner.get_profile', 'user', 'read')"
        )
        await toolplane.execute(
            "DELETE FROM toolplane.grants WHERE agent_id = 'research-agent'"
            " AND tool_pattern = 'learner.get_profile'"
        )
        # The audit log is append-only for the service.
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with toolplane.transaction():
                await toolplane.execute(
                    "UPDATE toolplane.audit_logs SET status = 'success' WHERE id = $1",
                    audit_id,
                )
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with toolplane.transaction():
                await toolplane.execute("DELETE FROM toolplane.audit_logs WHERE id = $1", audit_id)


async def test_context_role_cannot_reach_the_toolplane_schema(context: asyncpg.Connection) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await context.fetch("SELECT id FROM toolplane.agents")


# The context role: columns ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "column"),
    [(table, column) for table, columns in IDENTIFIER_COLUMNS.items() for column in columns],
)
async def test_context_role_cannot_select_identifier_columns(
    context: asyncpg.Connection, table: str, column: str
) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await context.fetch(f"SELECT {column} FROM {table}")


@pytest.mark.parametrize("table", sorted(IDENTIFIER_COLUMNS))
async def test_context_role_cannot_select_star_where_identifiers_live(
    context: asyncpg.Connection, table: str
) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await context.fetch(f"SELECT * FROM {table}")


async def test_no_readable_column_of_the_context_role_is_an_identifier(
    owner: asyncpg.Connection,
) -> None:
    forbidden = {column for columns in IDENTIFIER_COLUMNS.values() for column in columns}
    rows = await owner.fetch(
        """
        SELECT c.oid::regclass::text AS table_name, a.attname AS column_name
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname IN ('learning', 'knowledge') AND c.relkind = 'r'
          AND a.attnum > 0 AND NOT a.attisdropped
          AND has_column_privilege('nemo_context', c.oid, a.attnum, 'SELECT')
        """
    )
    readable = {(row["table_name"], row["column_name"]) for row in rows}
    assert ("learning.learners", "grade") in readable
    assert ("learning.learners", "family_id") in readable
    assert ("learning.evidence", "correct") in readable
    assert {(t, c) for t, c in readable if c in forbidden} == set()


async def test_context_role_reads_keys_of_a_bound_learner(context: asyncpg.Connection) -> None:
    async with learner_transaction(context, ["L-2041-1"], readonly=True):
        row = await context.fetchrow("SELECT id, family_id, user_id, grade FROM learning.learners")
        evidence = await context.fetch("SELECT correct, reliability FROM learning.evidence")
    assert row is not None
    assert dict(row) == {
        "id": "L-2041-1",
        "family_id": "F-2041-1",
        "user_id": "U-2041-L1",
        "grade": 8,
    }
    assert len(evidence) >= 12


# The context role: rows ---------------------------------------------------------------------


async def test_every_learner_keyed_table_has_forced_row_level_security(
    owner: asyncpg.Connection,
) -> None:
    rows = await owner.fetch(
        """
        SELECT c.oid::regclass::text AS name, c.relrowsecurity, c.relforcerowsecurity
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'learning' AND c.relkind = 'r'
          AND (c.relname = 'learners' OR EXISTS (
              SELECT FROM pg_attribute a
              WHERE a.attrelid = c.oid AND a.attname = 'learner_id' AND NOT a.attisdropped))
        """
    )
    # Found from the catalogue, so a future learner-keyed table without RLS fails here.
    assert {row["name"] for row in rows} == set(LEARNER_KEYED)
    assert all(row["relrowsecurity"] and row["relforcerowsecurity"] for row in rows)


@pytest.mark.parametrize(("table", "key"), sorted(LEARNER_KEYED.items()))
async def test_a_query_without_where_sees_only_the_bound_learner(
    owner: asyncpg.Connection, context: asyncpg.Connection, table: str, key: str
) -> None:
    everyone = {row[0] for row in await owner.fetch(f"SELECT DISTINCT {key} FROM {table}")}
    async with learner_transaction(context, ["L-2041-1"], readonly=True):
        bound = [row[0] for row in await context.fetch(f"SELECT {key} FROM {table}")]
    async with learner_transaction(context, [], readonly=True):
        empty_binding = await context.fetch(f"SELECT {key} FROM {table}")
    unbound = await context.fetch(f"SELECT {key} FROM {table}")

    assert bound, f"{table} has no L-2041-1 rows in the demo data"
    assert set(bound) == {"L-2041-1"}
    assert everyone - {"L-2041-1"}, f"{table} has no other learner's rows to hide"
    assert empty_binding == []
    assert unbound == []


async def test_mastery_without_where(context: asyncpg.Connection) -> None:
    async with learner_transaction(context, ["L-2041-1"], readonly=True):
        l1 = [
            row["learner_id"]
            for row in await context.fetch("SELECT learner_id FROM learning.mastery")
        ]
    async with learner_transaction(context, ["L-2041-10"], readonly=True):
        l10 = await context.fetch("SELECT learner_id FROM learning.mastery")
    async with learner_transaction(context, ["L-2041-1", "L-2041-3"], readonly=True):
        both = {
            row["learner_id"]
            for row in await context.fetch("SELECT learner_id FROM learning.mastery")
        }
    assert len(l1) >= 13
    assert set(l1) == {"L-2041-1"}
    assert l10 == []  # an id that merely starts like L-2041-1 binds nothing of L-2041-1
    assert both == {"L-2041-1", "L-2041-3"}


async def test_binding_ends_with_the_transaction(context: asyncpg.Connection) -> None:
    async with learner_transaction(context, ["L-2041-1"]):
        assert await context.fetchval("SELECT count(*) FROM learning.goals") > 0
    assert await context.fetchval("SELECT count(*) FROM learning.goals") == 0


async def test_writes_must_carry_a_bound_learner(context: asyncpg.Connection) -> None:
    insert = (
        "INSERT INTO learning.chat_messages"
        " (session_id, learner_id, turn_id, seq, role, type, status, content)"
        " VALUES ('CS-L1-TUTOR', 'L-2041-1', 'T6', 100, 'user', 'text', 'completed', 'test')"
    )
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
        async with learner_transaction(context, ["L-2041-2"]):
            await context.execute(insert)
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
        async with context.transaction():
            await context.execute(insert)

    # Bound to the row's learner, both writes succeed (then roll back, leaving the demo data).
    with pytest.raises(_RolledBackError):
        await _write_then_roll_back(context, insert)


async def _write_then_roll_back(context: asyncpg.Connection, insert: str) -> None:
    async with learner_transaction(context, ["L-2041-1"]):
        await context.execute(insert)
        await context.execute(
            "INSERT INTO learning.conversation_state (session_id, learner_id, agent_state)"
            " VALUES ('CS-L1-TUTOR', 'L-2041-1', '{}')"
            " ON CONFLICT (session_id) DO UPDATE SET agent_state = EXCLUDED.agent_state"
        )
        raise _RolledBackError


async def test_context_role_writes_only_conversation_tables(context: asyncpg.Connection) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with learner_transaction(context, ["L-2041-1"]):
            await context.execute("UPDATE learning.mastery SET mastery = 1")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with learner_transaction(context, ["L-2041-1"]):
            await context.execute("DELETE FROM learning.chat_messages")


async def test_access_check_relations_are_readable(context: asyncpg.Connection) -> None:
    # Family membership and roles are keyed by family and user: readable without a binding.
    members = await context.fetch(
        "SELECT user_id, relation FROM learning.family_members WHERE family_id = 'F-2041-1'"
    )
    assert ("U-2041-P1", "owner") in {(row["user_id"], row["relation"]) for row in members}
    assert (
        await context.fetchval("SELECT role FROM learning.users WHERE id = 'U-2041-S1'") == "staff"
    )
    # Learner-keyed relations are read in a transaction bound to the learner being checked.
    async with learner_transaction(context, ["L-2041-1"], readonly=True):
        assert await context.fetchval("SELECT family_id FROM learning.learners") == "F-2041-1"
        mentors = await context.fetch(
            "SELECT mentor_user_id, status FROM learning.mentor_assignments"
        )
    assert [tuple(row) for row in mentors] == [("U-2041-M1", "active")]
    async with learner_transaction(context, ["L-2041-2"], readonly=True):
        guardians = await context.fetch("SELECT user_id FROM learning.guardians")
        inactive = await context.fetch(
            "SELECT mentor_user_id, status FROM learning.mentor_assignments"
        )
    assert [row["user_id"] for row in guardians] == ["U-2041-G2"]
    assert [tuple(row) for row in inactive] == [("U-2041-M2", "inactive")]


# Definer functions --------------------------------------------------------------------------


async def test_age_is_whole_years_for_a_bound_learner_only(
    owner: asyncpg.Connection, context: asyncpg.Connection
) -> None:
    expected = await owner.fetchval(
        "SELECT date_part('year', age(current_date, birth_date))::int"
        " FROM learning.learners WHERE id = 'L-2041-1'"
    )
    async with learner_transaction(context, ["L-2041-1"], readonly=True):
        age = await context.fetchval("SELECT learning.learner_age_years('L-2041-1')")
        other = await context.fetchval("SELECT learning.learner_age_years('L-2041-2')")
    assert isinstance(age, int)
    assert age == expected
    assert 12 <= age <= 16
    assert other is None  # not bound: the function does not widen the binding
    assert await context.fetchval("SELECT learning.learner_age_years('L-2041-1')") is None
    result_type = await owner.fetchval(
        "SELECT pg_get_function_result('learning.learner_age_years(text)'::regprocedure)"
    )
    assert result_type == "integer"


async def test_toolplane_role_cannot_execute_the_age_function(
    owner: asyncpg.Connection, toolplane: asyncpg.Connection
) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await toolplane.fetchval("SELECT learning.learner_age_years('L-2041-1')")
    for function in (
        "learning.learner_age_years(text)",
        "learning.chat_session_learner(text)",
        "learning.circle_fingerprints(text, bytea)",
    ):
        assert not await owner.fetchval(
            "SELECT has_function_privilege('nemo_toolplane', $1, 'EXECUTE')", function
        )
        # No grant to PUBLIC (grantee 0) that any future role would inherit.
        public = await owner.fetchval(
            "SELECT count(*) FROM pg_proc, aclexplode(proacl) AS acl"
            " WHERE oid = $1::regprocedure AND acl.grantee = 0",
            function,
        )
        assert public == 0
        assert await owner.fetchval(
            "SELECT proacl IS NOT NULL FROM pg_proc WHERE oid = $1::regprocedure", function
        )


async def test_chat_session_learner_resolves_a_session(context: asyncpg.Connection) -> None:
    assert (
        await context.fetchval("SELECT learning.chat_session_learner('CS-L1-TUTOR')") == "L-2041-1"
    )
    assert await context.fetchval("SELECT learning.chat_session_learner('CS-missing')") is None


async def test_no_role_may_create_in_public(owner: asyncpg.Connection) -> None:
    for role in ("nemo_context", "nemo_toolplane"):
        assert not await owner.fetchval("SELECT has_schema_privilege($1, 'public', 'CREATE')", role)


async def test_the_identifier_key_digests_and_the_hmac_helpers_are_the_owners_alone(
    owner: asyncpg.Connection, context: asyncpg.Connection
) -> None:
    # With the digests or the helpers, the context role could fingerprint with a key of its own
    # choosing and test guesses about the circle offline (ADR 0014).
    for table in ("learning.identifier_keys",):
        for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE"):
            assert not await owner.fetchval(
                "SELECT has_table_privilege('nemo_context', $1, $2)", table, privilege
            )
    for function in (
        "learning.hmac_pad(bytea, integer)",
        "learning.hmac_sha256(bytea, bytea)",
        "learning.identifier_tokens(text)",
        "learning.identifier_accented_tokens(text)",
        "learning.identifier_key_registered(bytea)",
    ):
        assert not await owner.fetchval(
            "SELECT has_function_privilege('nemo_context', $1, 'EXECUTE')", function
        )
    assert await owner.fetchval(
        "SELECT has_function_privilege('nemo_context', 'learning.circle_fingerprints(text, bytea)',"
        " 'EXECUTE')"
    )
    row = await owner.fetchrow(
        "SELECT prosecdef, proconfig FROM pg_proc"
        " WHERE oid = 'learning.circle_fingerprints(text, bytea)'::regprocedure"
    )
    assert row is not None
    assert row["prosecdef"]
    assert row["proconfig"] == ["search_path=pg_catalog, pg_temp"]
