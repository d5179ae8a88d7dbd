"""``learning.circle_fingerprints``: the circle's identifiers as keyed fingerprints, for the learner
bound to the transaction only, folded and fingerprinted exactly as the gate folds and
fingerprints text.

The expected fingerprints are derived here from the identifier columns as the owner reads them,
with Python's ``hmac`` and the gate's folding: the two sides must meet on every word.
"""

from __future__ import annotations

import hashlib
import hmac
import string
from collections.abc import AsyncIterator

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_context.gate.circle import FINGERPRINT_BYTES, Circle
from nemo_context.gate.identifiers import identifier_kind
from nemo_context.gate.tokens import accented_words, words
from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY
from nemo_core.db import Pool, learner_transaction

from .gate.circles import Person, circle_rows

KEY = DEVELOPMENT_IDENTIFIER_KEY.encode()
SQL_PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
VIETNAMESE = "ăâđêôơưáàảãạắằẳẵặấầẩẫậéèẻẽẹếềểễệíìỉĩịóòỏõọốồổỗộớờởỡợúùủũụứừửữựýỳỷỹỵ"
TEXT = st.text(
    alphabet=string.ascii_letters
    + string.digits
    + VIETNAMESE
    + VIETNAMESE.upper()
    + " .,-_/@+()"
    + "\uff21\uff22\uff41\uff42\uff10\uff11\u0301\u0300\u00c0",
    max_size=40,
)


@pytest.fixture(scope="module")
async def owner(owner_dsn: str) -> AsyncIterator[asyncpg.Connection[asyncpg.Record]]:
    conn = await asyncpg.connect(owner_dsn)
    yield conn
    await conn.close()


@SQL_PROPERTY
@given(key=st.binary(min_size=0, max_size=100), message=st.binary(max_size=200))
async def test_hmac_in_sql_is_hmac_sha256(
    owner: asyncpg.Connection[asyncpg.Record], key: bytes, message: bytes
) -> None:
    computed = await owner.fetchval("SELECT learning.hmac_sha256($1, $2)", key, message)
    assert computed == hmac.new(key, message, hashlib.sha256).digest()


@SQL_PROPERTY
@given(value=TEXT)
async def test_the_database_folds_values_into_the_words_the_gate_reads(
    owner: asyncpg.Connection[asyncpg.Record], value: str
) -> None:
    assert await owner.fetchval("SELECT learning.identifier_tokens($1)", value) == words(value)
    accented = await owner.fetchval("SELECT learning.identifier_accented_tokens($1)", value)
    assert accented == accented_words(value)


async def _circle_rows(pool: Pool, learner_id: str, key: bytes) -> list[tuple[str, list[str]]]:
    async with learner_transaction(pool, [learner_id], readonly=True) as conn:
        rows = await conn.fetch(
            "SELECT kind, fingerprints FROM learning.circle_fingerprints($1, $2)", learner_id, key
        )
    return sorted((row["kind"], list(row["fingerprints"])) for row in rows)


async def _expected(
    owner: asyncpg.Connection[asyncpg.Record], learner_id: str
) -> list[tuple[str, list[str]]]:
    """The rows derived here from the identifier columns as the owner reads them."""
    kids = await owner.fetch(
        "SELECT * FROM learning.learners WHERE family_id = "
        "(SELECT family_id FROM learning.learners WHERE id = $1)",
        learner_id,
    )
    users = await owner.fetch(
        """SELECT display_name, email, phone FROM learning.users WHERE id IN (
            SELECT user_id FROM learning.learners WHERE family_id =
                (SELECT family_id FROM learning.learners WHERE id = $1)
            UNION SELECT user_id FROM learning.family_members WHERE family_id =
                (SELECT family_id FROM learning.learners WHERE id = $1)
            UNION SELECT user_id FROM learning.guardians WHERE learner_id = $1
            UNION SELECT mentor_user_id FROM learning.mentor_assignments WHERE learner_id = $1)""",
        learner_id,
    )
    circle = [
        Person(
            kid["display_name"],
            kid["email"],
            kid["phone"],
            kid["address"],
            kid["school_name"],
            kid["birth_date"],
        )
        for kid in kids
    ]
    circle += [Person(user["display_name"], user["email"], user["phone"]) for user in users]
    return circle_rows(KEY, circle)


@pytest.mark.parametrize("learner_id", ["L-2041-1", "L-2041-2"])
async def test_the_circle_is_every_identifier_of_the_learner_its_family_guardians_and_mentors(
    owner: asyncpg.Connection[asyncpg.Record], context_pool: Pool, learner_id: str
) -> None:
    rows = await _circle_rows(context_pool, learner_id, KEY)
    expected = await _expected(owner, learner_id)

    # name_joined rows are sets: compared as sets, the rest as ordered words.
    def normalised(rows: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
        # Sets in SQL (distinct values, joined pairs) are compared as sets.
        unique = {
            (kind, tuple(sorted(fps) if kind == "name_joined" else fps)) for kind, fps in rows
        }
        return sorted((kind, list(fps)) for kind, fps in unique)

    assert normalised(rows) == normalised(expected)
    assert all(len(fp) == 2 * FINGERPRINT_BYTES for _, fps in rows for fp in fps)


async def test_nothing_answers_for_a_learner_not_bound_or_an_unregistered_key(
    context_pool: Pool,
) -> None:
    async with learner_transaction(context_pool, ["L-2041-2"], readonly=True) as conn:
        assert (
            await conn.fetch("SELECT * FROM learning.circle_fingerprints('L-2041-1', $1)", KEY)
            == []
        )
    with pytest.raises(asyncpg.InvalidAuthorizationSpecificationError):
        await _circle_rows(context_pool, "L-2041-1", b"a key nobody registered, long enough")


async def test_the_context_role_cannot_fold_or_hash_values_itself(context_pool: Pool) -> None:
    async with context_pool.acquire() as conn:
        for statement in (
            "SELECT learning.identifier_tokens('x')",
            "SELECT learning.hmac_sha256('\\x00'::bytea, '\\x00'::bytea)",
            "SELECT learning.hmac_pad('\\x00'::bytea, 54)",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.fetchval(statement)


async def test_a_circle_read_from_the_database_finds_its_own_people(context_pool: Pool) -> None:
    circle = Circle.from_rows(KEY, await _circle_rows(context_pool, "L-2041-2", KEY))
    assert identifier_kind("Bạn Trần Bảo Ngọc ở nhà", circle) == "name"
    assert identifier_kind("Hôm nay em học bài về hàm số bậc nhất", circle) is None
