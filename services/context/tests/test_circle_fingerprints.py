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

from nemo_context.gate.circle import FINGERPRINT_BYTES, Circle, fingerprint
from nemo_context.gate.tokens import words
from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY
from nemo_core.db import Pool, learner_transaction

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


async def _circle_rows(pool: Pool, learner_id: str, key: bytes) -> list[tuple[str, list[str]]]:
    async with learner_transaction(pool, [learner_id], readonly=True) as conn:
        rows = await conn.fetch(
            "SELECT kind, fingerprints FROM learning.circle_fingerprints($1, $2)", learner_id, key
        )
    return sorted((row["kind"], list(row["fingerprints"])) for row in rows)


def _prints(values: list[str]) -> list[str]:
    return [fingerprint(KEY, value) for value in values]


async def _expected(
    owner: asyncpg.Connection[asyncpg.Record], learner_id: str
) -> list[tuple[str, list[str]]]:
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
    expected: list[tuple[str, list[str]]] = []
    names = [words(kid["display_name"]) for kid in kids] + [words(u["display_name"]) for u in users]
    for name in names:
        expected.append(("name", _prints(name)))
        pairs = {a + b for i, a in enumerate(name) for j, b in enumerate(name) if i != j}
        expected.append(("name_joined", _prints(sorted(pairs | {"".join(name)}))))
    for email in {kid["email"] for kid in kids} | {u["email"] for u in users}:
        if email:
            expected.append(("email", _prints(words(email.split("@")[0]))))
    for phone in {kid["phone"] for kid in kids} | {u["phone"] for u in users}:
        if phone:
            digits = "".join(char for char in phone if char.isdigit())
            expected.append(("phone", _prints([digits.removeprefix("0")])))
    for kid in kids:
        first_part = kid["address"].split(",")[0]
        house = next(i for i, char in enumerate(first_part) if char.isdigit())
        expected.append(("address", _prints(words(first_part[house:]))))
        expected.append(("school", _prints(words(kid["school_name"]))))
        expected.append(("birth_date", _prints([kid["birth_date"].isoformat()])))
    return expected


@pytest.mark.parametrize("learner_id", ["L-2041-1", "L-2041-2"])
async def test_the_circle_is_every_identifier_of_the_learner_its_family_guardians_and_mentors(
    owner: asyncpg.Connection[asyncpg.Record], context_pool: Pool, learner_id: str
) -> None:
    rows = await _circle_rows(context_pool, learner_id, KEY)
    expected = await _expected(owner, learner_id)
    # name_joined rows are sets: compared as sets, the rest as ordered words.
    normalised = sorted((kind, sorted(fps) if kind == "name_joined" else fps) for kind, fps in rows)
    assert normalised == sorted(
        (kind, sorted(fps) if kind == "name_joined" else fps) for kind, fps in expected
    )
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
    assert circle.spans("ban tran bao ngoc o 47 le van sy nhe")
    assert not circle.spans("hom nay em hoc bai ve ham so bac nhat")
