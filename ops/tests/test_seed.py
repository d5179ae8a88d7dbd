"""The demo data set: what it must contain, and that loading it is idempotent."""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest

from nemo_core.db import connect
from nemo_core.text import fold
from nemo_ops.migrate import migrate
from nemo_ops.seed import SeedError, seed, upsert_statement
from nemo_ops.seed_data import TABLES, TableData

DatabaseFactory = Callable[[], Awaitable[str]]


@pytest.fixture
async def owner(owner_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await connect(owner_dsn)
    yield conn
    await conn.close()


async def _column(conn: asyncpg.Connection, query: str, *args: object) -> list[object]:
    return [row[0] for row in await conn.fetch(query, *args)]


async def _snapshot(dsn: str) -> dict[str, list[tuple[object, ...]]]:
    """The seeded columns of every row of every seeded table, in a stable order."""
    conn = await connect(dsn)
    try:
        snapshot: dict[str, list[tuple[object, ...]]] = {}
        for data in TABLES:
            # The seeded columns only: identity keys and defaults are the database's business.
            columns = ", ".join(data.rows[0])
            order = ", ".join(data.key)
            rows = await conn.fetch(f"SELECT {columns} FROM {data.table} ORDER BY {order}")
            snapshot[data.table] = [tuple(row) for row in rows]
        return snapshot
    finally:
        await conn.close()


# Contents --------------------------------------------------------------------------------------


async def test_families_learners_and_relations(owner: asyncpg.Connection) -> None:
    learners = {
        row["id"]: (row["family_id"], row["grade"])
        for row in await owner.fetch("SELECT id, family_id, grade FROM learning.learners")
    }
    assert learners["L-2041-1"] == ("F-2041-1", 8)
    assert learners["L-2041-2"][0] == "F-2041-2"
    assert learners["L-2041-3"] == ("F-2041-1", 5)
    assert "L-2041-10" in learners

    owners = {
        row["family_id"]: row["user_id"]
        for row in await owner.fetch(
            "SELECT family_id, user_id FROM learning.family_members WHERE relation = 'owner'"
        )
    }
    assert owners["F-2041-1"] == "U-2041-P1"
    assert owners["F-2041-2"] == "U-2041-P2"
    assert (
        await owner.fetchval("SELECT role FROM learning.users WHERE id = 'U-2041-P1'") == "parent"
    )
    assert await _column(owner, "SELECT id FROM learning.users WHERE role = 'staff'") == [
        "U-2041-S1"
    ]

    assignments = await owner.fetch(
        "SELECT mentor_user_id, learner_id, status FROM learning.mentor_assignments ORDER BY 1"
    )
    assert [tuple(row) for row in assignments] == [
        ("U-2041-M1", "L-2041-1", "active"),
        ("U-2041-M2", "L-2041-2", "inactive"),
    ]
    # A mentor without any assignment, to prove that the role alone reaches no learner.
    assert await owner.fetchval(
        "SELECT count(*) FROM learning.users u WHERE role = 'mentor' AND NOT EXISTS"
        " (SELECT FROM learning.mentor_assignments m WHERE m.mentor_user_id = u.id)"
    )


async def test_identifier_columns_hold_realistic_values(owner: asyncpg.Connection) -> None:
    row = await owner.fetchrow("SELECT * FROM learning.learners WHERE id = 'L-2041-1'")
    assert row is not None
    for column in ("display_name", "first_name", "last_name", "birth_date", "email", "phone",
                   "address", "school_name", "avatar_url", "facebook_url", "links_json",
                   "photo_url"):  # fmt: skip
        assert row[column], column
    assert "@" in row["email"]
    assert row["display_name"] != unicodedata.normalize("NFD", row["display_name"])  # diacritics


async def test_knowledge_nodes_have_vietnamese_titles_and_english_aliases(
    owner: asyncpg.Connection,
) -> None:
    aliases = {
        row["title"]: row["aliases"]
        for row in await owner.fetch("SELECT title, aliases FROM knowledge.nodes")
    }
    assert "algebraic identities" in aliases["Hằng đẳng thức"]
    assert "slope" in aliases["Hệ số góc"]
    assert "quadratic equations" in aliases["Phương trình bậc hai"]
    assert len(aliases) >= 20
    subjects = await _column(owner, "SELECT DISTINCT subject FROM knowledge.nodes")
    grades = await _column(owner, "SELECT DISTINCT grade FROM knowledge.nodes")
    assert len(subjects) >= 3
    assert len(grades) >= 4
    assert await owner.fetchval("SELECT count(*) FROM knowledge.edges") >= 10
    assert not await owner.fetchval(
        "SELECT count(*) FROM knowledge.items WHERE answer_key = '' OR rubric = ''"
    )


async def test_folded_titles_match_the_application_folding(owner: asyncpg.Connection) -> None:
    rows = await owner.fetch(
        "SELECT title, title_folded, aliases, search_text FROM knowledge.nodes"
    )
    for row in rows:
        assert row["title_folded"] == fold(row["title"])
        assert row["search_text"] == fold(" ".join([row["title"], *row["aliases"]]))
    assert await _column(
        owner,
        "SELECT id FROM knowledge.nodes WHERE title_folded LIKE '%' || $1 || '%'",
        "he so goc",
    ) == ["math-08-slope"]
    assert await _column(
        owner,
        "SELECT id FROM knowledge.nodes WHERE search_text LIKE '%' || knowledge.fold_vi($1) || '%'",
        "Quadratic Equations",
    ) == ["math-09-quadratic-equations"]
    # Upper-case and decomposed input fold too, whatever the database's ctype.
    assert await owner.fetchval("SELECT knowledge.fold_vi($1)", "ĐỊNH LÍ") == "dinh li"
    decomposed = unicodedata.normalize("NFD", "Hằng đẳng thức")
    assert await owner.fetchval("SELECT knowledge.fold_vi($1)", decomposed) == "hang dang thuc"


async def test_measures_span_every_state(owner: asyncpg.Connection) -> None:
    rows = await owner.fetch(
        "SELECT mastery, confidence, coverage FROM learning.mastery WHERE learner_id = 'L-2041-1'"
    )
    assert len(rows) >= 13  # so mastery limits of 5, 8 and 12 all cut

    def state(mastery: float, confidence: float) -> str:
        if confidence < 0.25:
            return "unknown"
        return "solid" if mastery >= 0.8 else "shaky" if mastery >= 0.5 else "gap"

    assert {state(r["mastery"], r["confidence"]) for r in rows} == {
        "unknown",
        "solid",
        "shaky",
        "gap",
    }
    assert any(r["coverage"] is None for r in rows)  # missing stays missing, never 0


async def test_evidence_holds_distinct_verbatim_answers(owner: asyncpg.Connection) -> None:
    rows = await owner.fetch(
        "SELECT correct, payload_json FROM learning.evidence WHERE learner_id = 'L-2041-1'"
        " ORDER BY created_at DESC"
    )
    assert len(rows) >= 12
    answers = [row["payload_json"]["answer"] for row in rows]
    assert len(set(answers)) == len(answers)
    assert all(len(answer) >= 1 for answer in answers)
    recent = [row["correct"] for row in rows[:10]]
    assert (recent.count(True), recent.count(False)) == (6, 4)


async def test_goals_retention_and_learner_models(owner: asyncpg.Connection) -> None:
    assert await owner.fetchval("SELECT count(*) FROM learning.goals WHERE learner_id = 'L-2041-1'")
    assert await owner.fetchval(
        "SELECT count(*) FROM learning.retention WHERE learner_id = 'L-2041-1'"
    )
    kinds = {"readiness", "current_plan", "next_experience", "competency", "progress"}
    for learner in ("L-2041-1", "L-2041-3"):
        found = await _column(
            owner,
            "SELECT DISTINCT kind FROM learning.learner_model_versions WHERE learner_id = $1",
            learner,
        )
        assert kinds <= set(found), learner
    reason = await owner.fetchval(
        "SELECT model_json ->> 'reason' FROM learning.learner_model_versions"
        " WHERE learner_id = 'L-2041-1' AND kind = 'next_experience'"
    )
    assert reason
    assert not await owner.fetchval(
        "SELECT count(*) FROM learning.learner_model_versions WHERE learner_id = 'L-2041-2'"
    )


async def test_chat_messages_cover_every_case(owner: asyncpg.Connection) -> None:
    rows = await owner.fetch(
        "SELECT role, type, status, tool_summary FROM learning.chat_messages"
        " WHERE session_id = 'CS-L1-TUTOR'"
    )
    statuses = {row["status"] for row in rows if row["role"] == "assistant"}
    assert statuses == {"completed", "failed", "partial", "cancelled"}
    assert "pending" in {row["status"] for row in rows if row["role"] == "user"}
    assert any(row["type"] == "ui_event" for row in rows)
    assert all(row["tool_summary"] for row in rows if row["type"] == "tool_result")
    assert any(row["type"] == "tool_result" for row in rows)
    assert await owner.fetchval(
        "SELECT covers_through_seq FROM learning.conversation_summaries"
        " WHERE session_id = 'CS-L1-TUTOR' AND version = 1"
    )
    assert await owner.fetchval(
        "SELECT agent_state FROM learning.conversation_state WHERE session_id = 'CS-L1-TUTOR'"
    )


async def test_agents_grants_and_policies(owner: asyncpg.Connection) -> None:
    grants: dict[str, set[tuple[str, str, str, str]]] = {}
    for row in await owner.fetch("SELECT * FROM toolplane.grants"):
        grants.setdefault(row["agent_id"], set()).add(
            (
                row["tool_pattern"],
                row["resource_scope"],
                row["environment_scope"],
                row["permission"],
            )
        )
    docs = {("docs.search_docs", "*", "*", "read"), ("docs.get_doc", "*", "*", "read")}
    knowledge = {
        ("coral.search_knowledge", "*", "*", "read"),
        ("coral.get_knowledge_node", "*", "*", "read"),
    }
    assert grants["research-agent"] == knowledge | docs
    assert grants["engineering-agent"] == docs | {
        ("application.list", "*", "*", "read"),
        ("application.get", "*", "*", "read"),
        ("application.get_repository", "*", "*", "read"),
        ("application.get_environment", "*", "*", "read"),
        ("application.set_status", "*", "*", "write"),
    }
    learning = grants["learning-agent"]
    assert knowledge | docs <= learning
    user_scoped = {pattern for pattern, scope, _, _ in learning if scope == "user"}
    assert {"assessment.*", "learning.*", "nemo12.get_learner_learning_state"} <= user_scoped
    assert "learner.get_profile" in user_scoped
    assert not any(permission == "write" for *_, permission in learning)

    policies = {row["name"]: row for row in await owner.fetch("SELECT * FROM toolplane.policies")}
    assert policies["deny-learner-writes"]["effect"] == "deny"
    assert policies["deny-learner-writes"]["tool_scope"] == "learner.update_*"
    assert policies["approve-high-risk-writes"]["conditions"] == (
        '{"risk_at_least": "HIGH", "mode": "write"}'
    )
    assert policies["approve-production-writes"]["environment_scope"] == "production"

    # Tokens are issued by an operator command, never seeded.
    assert await owner.fetchval("SELECT count(*) FROM toolplane.agent_tokens") == 0
    assert await _column(owner, "SELECT id FROM toolplane.agents ORDER BY id") == [
        "engineering-agent",
        "learning-agent",
        "research-agent",
    ]


async def test_the_six_applications(owner: asyncpg.Connection) -> None:
    rows = await owner.fetch("SELECT * FROM toolplane.applications ORDER BY id")
    assert [row["id"] for row in rows] == [
        "nemo12-api",
        "nemo12-coral",
        "nemo12-foundry",
        "nemo12-learn",
        "nemo12-tool-plane",
        "nemo12-web",
    ]
    for row in rows:
        for column in ("name", "domain", "repository", "repository_path", "owner",
                       "description", "deployment_target"):  # fmt: skip
            assert row[column], (row["id"], column)


# Loading ---------------------------------------------------------------------------------------


async def test_seed_is_idempotent_and_restores_demo_rows(
    make_empty_database: DatabaseFactory,
) -> None:
    dsn = await make_empty_database()
    await migrate(dsn)
    first = await seed(dsn)
    assert first.rows == sum(len(data.rows) for data in TABLES)
    before = await _snapshot(dsn)

    conn = await connect(dsn)
    try:
        await conn.execute(
            "UPDATE learning.mastery SET mastery = 0.99"
            " WHERE learner_id = 'L-2041-1' AND node_id = 'math-08-slope'"
        )
        await conn.execute("DELETE FROM toolplane.grants WHERE agent_id = 'research-agent'")
        await conn.execute(
            "UPDATE toolplane.policies SET enabled = false WHERE name = 'deny-learner-writes'"
        )
        # Rows made at run time are not demo rows and must survive a reseed.
        await conn.execute(
            "INSERT INTO toolplane.audit_logs (request_id, agent_id, tool_id, decision, status,"
            " environment) VALUES ('REQ-kept', 'research-agent', 'docs.get_doc:v1', 'allow',"
            " 'success', 'development')"
        )
    finally:
        await conn.close()

    await seed(dsn)
    after = await _snapshot(dsn)
    for data in TABLES:
        assert after[data.table] == before[data.table], data.table
    conn = await connect(dsn)
    try:
        assert await conn.fetchval(
            "SELECT count(*) FROM toolplane.audit_logs WHERE request_id = 'REQ-kept'"
        )
    finally:
        await conn.close()


async def test_reseeding_keeps_policy_versions_and_a_change_bumps_them(
    make_empty_database: DatabaseFactory,
) -> None:
    dsn = await make_empty_database()
    await migrate(dsn)
    await seed(dsn)
    query = "SELECT name, version, updated_at FROM toolplane.policies ORDER BY name"
    conn = await connect(dsn)
    try:
        before = [tuple(row) for row in await conn.fetch(query)]
        await seed(dsn)
        # An upsert that changes nothing must not invalidate approvals bound to a version.
        assert [tuple(row) for row in await conn.fetch(query)] == before
        assert {row[1] for row in before} == {1}
        await conn.execute(
            "UPDATE toolplane.policies SET tool_scope = 'learner.*'"
            " WHERE name = 'deny-learner-writes'"
        )
        assert (
            await conn.fetchval(
                "SELECT version FROM toolplane.policies WHERE name = 'deny-learner-writes'"
            )
            == 2
        )
    finally:
        await conn.close()


async def test_seed_refuses_an_unmigrated_database(make_empty_database: DatabaseFactory) -> None:
    dsn = await make_empty_database()
    with pytest.raises(SeedError, match="nemo migrate"):
        await seed(dsn)


def test_upsert_statement_updates_every_non_key_column() -> None:
    data = TableData("learning.goals", ("id",), ({"id": "G-1", "title": "t", "status": "active"},))
    statement, columns = upsert_statement(data)
    assert columns == ("id", "title", "status")
    assert statement == (
        'INSERT INTO "learning"."goals" ("id", "title", "status") VALUES ($1, $2, $3) '
        'ON CONFLICT ("id") DO UPDATE SET "title" = EXCLUDED."title", "status" = EXCLUDED."status"'
    )
    ragged = TableData("learning.goals", ("id",), ({"id": "G-1", "title": "t"}, {"id": "G-2"}))
    with pytest.raises(ValueError, match="do not all have"):
        upsert_statement(ragged)
