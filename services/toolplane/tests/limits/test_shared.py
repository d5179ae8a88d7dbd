"""Token buckets in PostgreSQL: all or nothing, exact under concurrency from several pools (as
from several replicas), refilled on the database's clock, purged when full, and bounded in time
when the store does not answer."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_core.db import Pool, connect, create_pool
from nemo_toolplane.limits.shared import Bucket, BucketsUnavailable, SharedBuckets, bucket_key

#: Slow enough that nothing refills while a test runs.
STILL = 1e-9


@pytest.fixture
async def pools(toolplane_dsn: str) -> AsyncIterator[tuple[Pool, Pool]]:
    """Two pools of the tool plane's role, as two replicas have."""
    first = await create_pool(toolplane_dsn, max_size=8)
    second = await create_pool(toolplane_dsn, max_size=8)
    yield first, second
    await first.close()
    await second.close()


def _keys(n: int) -> list[str]:
    run = uuid.uuid4().hex
    return [bucket_key("tests", run, str(i)) for i in range(n)]


_CALLS = st.lists(st.frozensets(st.integers(0, 3), min_size=1, max_size=4), min_size=1, max_size=25)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bursts=st.lists(st.integers(1, 4), min_size=4, max_size=4), calls=_CALLS)
async def test_a_call_takes_from_every_bucket_or_from_none(
    pools: tuple[Pool, Pool], bursts: list[int], calls: list[frozenset[int]]
) -> None:
    keys = _keys(4)
    store = SharedBuckets(pools[0], timeout=5)
    left = list(bursts)
    for n, call in enumerate(calls):
        buckets = [Bucket(keys[i], STILL, bursts[i]) for i in sorted(call)]
        taken = await store.take(buckets)
        expected = all(left[i] >= 1 for i in call)
        assert taken.admitted is expected, (n, call, left)
        if expected:
            for i in call:
                left[i] -= 1
            assert taken.refused is None
        else:
            # The refusal names an empty bucket of the call and how long it needs.
            assert taken.refused in {keys[i] for i in call if left[i] < 1}
            assert taken.wait > 0


async def test_concurrent_calls_from_two_pools_get_exactly_the_burst(
    pools: tuple[Pool, Pool],
) -> None:
    (key,) = _keys(1)
    stores = [SharedBuckets(pool, timeout=10) for pool in pools]
    results = await asyncio.gather(
        *(stores[n % 2].take([Bucket(key, STILL, 17)]) for n in range(60))
    )
    assert sum(taken.admitted for taken in results) == 17


async def test_a_bucket_refills_at_its_rate_on_the_database_clock(
    pools: tuple[Pool, Pool], owner: asyncpg.Connection
) -> None:
    (key,) = _keys(1)
    store = SharedBuckets(pools[0], timeout=5)
    bucket = Bucket(key, 4.0, 2)
    assert [(await store.take([bucket])).admitted for _ in range(3)] == [True, True, False]
    refused = await store.take([bucket])
    # An empty bucket of 4 tokens a second has one again within a quarter of a second.
    assert 0 < refused.wait <= 0.25
    await owner.execute("SELECT pg_sleep($1)", refused.wait + 0.05)
    assert (await store.take([bucket])).admitted


async def test_full_buckets_are_purged_and_others_kept(
    pools: tuple[Pool, Pool], owner: asyncpg.Connection
) -> None:
    fast, slow = _keys(2)
    store = SharedBuckets(pools[0], timeout=5)
    await store.take([Bucket(fast, 100.0, 1), Bucket(slow, STILL, 1)])
    await owner.execute("SELECT pg_sleep(0.05)")
    await owner.execute("DELETE FROM toolplane.rate_buckets WHERE full_at <= clock_timestamp()")
    kept = await owner.fetch(
        "SELECT key FROM toolplane.rate_buckets WHERE key = ANY($1)", [fast, slow]
    )
    assert [row["key"] for row in kept] == [slow]
    # A purged bucket is a full one: it gives its whole burst again.
    assert (await store.take([Bucket(fast, 100.0, 1)])).admitted


async def test_a_store_that_does_not_answer_is_unavailable_within_the_timeout(
    pools: tuple[Pool, Pool], owner_dsn: str
) -> None:
    (key,) = _keys(1)
    store = SharedBuckets(pools[0], timeout=0.3)
    locker = await connect(owner_dsn)
    try:
        async with locker.transaction():
            await locker.execute("LOCK TABLE toolplane.rate_buckets IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(BucketsUnavailable):
                async with asyncio.timeout(5):
                    await store.take([Bucket(key, 1.0, 1)])
    finally:
        await locker.close()
    assert (await store.take([Bucket(key, 1.0, 1)])).admitted


async def test_tokens_taken_in_a_transaction_that_rolls_back_are_given_back(
    pools: tuple[Pool, Pool],
) -> None:
    (key,) = _keys(1)
    bucket = Bucket(key, STILL, 1)
    async with pools[0].acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        assert (await SharedBuckets.take_in(conn, [bucket])).admitted
        await transaction.rollback()
    store = SharedBuckets(pools[1], timeout=5)
    assert [(await store.take([bucket])).admitted for _ in range(2)] == [True, False]


@pytest.mark.parametrize(
    ("count", "rates", "bursts"),
    [(1, [0.0], [1.0]), (1, [-1.0], [1.0]), (1, [1.0], [0.5]), (1, [1.0, 1.0], [1.0, 1.0])],
)
async def test_the_store_refuses_buckets_that_could_never_hold(
    owner: asyncpg.Connection, count: int, rates: list[float], bursts: list[float]
) -> None:
    with pytest.raises(asyncpg.RaiseError):
        await owner.fetchrow(
            "SELECT * FROM toolplane.take_tokens($1::text[], $2::float8[], $3::float8[])",
            _keys(count),
            rates,
            bursts,
        )
