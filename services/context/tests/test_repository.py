"""The bundle queries as the nemo_context role: every statement binds the requested learner, and
the database itself hides other learners and identifier columns."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest
from asyncpg.connection import LoggedQuery

from nemo_context.purposes import CONVERSATION, PURPOSES
from nemo_context.repository import PostgresLearnerRepository, linked_identifiers, statement_for
from nemo_core.db import LEARNER_IDS_SETTING, Pool, init_connection, learner_transaction

from .conftest import TEST_IDENTIFIER_KEY

LEARNER_TABLES = (
    "learning.learners",
    "learning.mastery",
    "learning.evidence",
    "learning.goals",
    "learning.retention",
    "learning.learner_model_versions",
    "learning.guardians",
    "learning.mentor_assignments",
)
BUNDLE_PURPOSES = [name for name, purpose in PURPOSES.items() if purpose.kind != CONVERSATION]
NOW = datetime.now(UTC)


@pytest.mark.parametrize("learner_id", ["L-2041-1", "L-2041-2", "L-2041-10"])
async def test_every_bundle_statement_binds_exactly_the_requested_learner(
    recorded_pool: tuple[Pool, list[LoggedQuery]], learner_id: str
) -> None:
    pool, statements = recorded_pool
    repository = PostgresLearnerRepository(pool, identifier_key=TEST_IDENTIFIER_KEY)
    for name in BUNDLE_PURPOSES:
        statements.clear()
        assert await repository.read(learner_id, PURPOSES[name], NOW) is not None
        touching = [s for s in statements if any(t in s.query for t in LEARNER_TABLES)]
        # One statement per purpose, composites (learning_state) included.
        assert len(touching) == 1, f"{name}: {len(touching)} data statements"
        for statement in touching:
            assert statement.args == (learner_id, NOW), f"{name}: {statement.query[:80]}"
        # Row-level security was bound to the same learner first, in the same transaction.
        queries = [s.query for s in statements]
        [bind] = [s for s in statements if LEARNER_IDS_SETTING in s.args]
        assert bind.args == (LEARNER_IDS_SETTING, learner_id)
        assert queries.index(bind.query) < queries.index(touching[0].query)
        assert queries[0].startswith("BEGIN")
        assert "COMMIT;" in queries[queries.index(touching[-1].query) :]


async def test_statements_never_name_identifier_columns_or_verbatim_answers(
    recorded_pool: tuple[Pool, list[LoggedQuery]],
) -> None:
    pool, statements = recorded_pool
    repository = PostgresLearnerRepository(pool, identifier_key=TEST_IDENTIFIER_KEY)
    for name in BUNDLE_PURPOSES:
        await repository.read("L-2041-1", PURPOSES[name], NOW)
    text = "\n".join(statement.query for statement in statements)
    for column in ("payload_json", "display_name", "birth_date", "email", "phone", "school"):
        assert column not in text
    assert "learning.families" not in text


async def test_an_unknown_learner_reads_as_none(context_pool: Pool) -> None:
    repository = PostgresLearnerRepository(context_pool, identifier_key=TEST_IDENTIFIER_KEY)
    assert await repository.read("L-2041-404", PURPOSES["learning_state"], NOW) is None


async def test_a_query_without_where_sees_only_the_bound_learner(context_pool: Pool) -> None:
    async with learner_transaction(context_pool, ["L-2041-1"], readonly=True) as conn:
        mastery = await conn.fetch("SELECT learner_id FROM learning.mastery")
        evidence = await conn.fetch("SELECT learner_id FROM learning.evidence")
        learners = await conn.fetch("SELECT id FROM learning.learners")
        models = await conn.fetch("SELECT learner_id FROM learning.learner_model_versions")
    assert {row["learner_id"] for row in mastery} == {"L-2041-1"}
    assert len(mastery) == 15
    assert {row["learner_id"] for row in evidence} == {"L-2041-1"}
    assert [row["id"] for row in learners] == ["L-2041-1"]
    assert {row["learner_id"] for row in models} == {"L-2041-1"}


async def test_nothing_bound_sees_no_learner_rows(context_pool: Pool) -> None:
    async with context_pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM learning.mastery") == 0
        assert await conn.fetchval("SELECT count(*) FROM learning.learners") == 0


@pytest.mark.parametrize(
    "query",
    [
        "SELECT display_name FROM learning.learners",
        "SELECT birth_date FROM learning.learners",
        "SELECT email FROM learning.users",
        "SELECT payload_json FROM learning.evidence",
        "SELECT * FROM learning.learners",
    ],
)
async def test_identifier_columns_and_answers_are_refused_to_the_role(
    context_pool: Pool, query: str
) -> None:
    async with learner_transaction(context_pool, ["L-2041-1"], readonly=True) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetch(query)


async def test_linked_identifiers_cover_the_learner_family_and_linked_users(
    context_pool: Pool,
) -> None:
    async with learner_transaction(context_pool, ["L-2041-1"], readonly=True) as conn:
        linked = await linked_identifiers(conn, "L-2041-1")
        assert await linked_identifiers(conn, "L-2041-2") == frozenset()
    # Own account, family owner/guardian/supporter, guardian outside the family, mentor, sibling.
    assert linked == {
        "L-2041-1",
        "F-2041-1",
        "U-2041-L1",
        "U-2041-P1",
        "U-2041-P4",
        "U-2041-G1",
        "U-2041-G3",
        "U-2041-M1",
        "L-2041-3",
    }


async def test_a_siblings_learner_and_user_ids_are_linked_too(context_pool: Pool) -> None:
    async with learner_transaction(context_pool, ["L-2041-3"], readonly=True) as conn:
        linked = await linked_identifiers(conn, "L-2041-3")
        # Only for the bound learner: the view shows nothing about others.
        siblings_of_unbound = await conn.fetchval(
            "SELECT count(*) FROM learning.family_learner_keys WHERE learner_id <> 'L-2041-3'"
        )
    assert {"L-2041-1", "U-2041-L1"} <= linked
    assert siblings_of_unbound == 0


async def test_linked_identifiers_include_inactive_mentors(context_pool: Pool) -> None:
    async with learner_transaction(context_pool, ["L-2041-2"], readonly=True) as conn:
        linked = await linked_identifiers(conn, "L-2041-2")
    assert linked == {"L-2041-2", "F-2041-2", "U-2041-P2", "U-2041-G2", "U-2041-M2"}


@pytest.mark.parametrize("learner_id", ["L-2041-1", "L-2041-2"])
async def test_each_statement_reads_only_its_learner_even_without_row_level_security(
    owner_dsn: str, context_pool: Pool, learner_id: str
) -> None:
    """Row-level security would hide a subquery that forgot its ``WHERE``; the owner, whom it
    does not restrict, must still read exactly what the bound context role reads."""
    owner = await asyncpg.connect(owner_dsn)
    try:
        await init_connection(owner)
        assert await owner.fetchval(
            "SELECT rolbypassrls OR rolsuper FROM pg_roles WHERE rolname = current_user"
        )
        for name in BUNDLE_PURPOSES:
            statement = statement_for(PURPOSES[name])
            # Bound too, for the age function that checks the binding itself.
            async with learner_transaction(owner, [learner_id], readonly=True):
                unrestricted = await owner.fetchrow(statement, learner_id, NOW)
            async with learner_transaction(context_pool, [learner_id], readonly=True) as conn:
                bound = await conn.fetchrow(statement, learner_id, NOW)
            assert unrestricted is not None
            assert bound is not None
            assert _comparable(unrestricted) == _comparable(bound), name
    finally:
        await owner.close()


def _comparable(row: asyncpg.Record) -> dict[str, object]:
    # The linked ids are a set: their order is the planner's.
    return {**dict(row), "linked_ids": sorted(row["linked_ids"])}
