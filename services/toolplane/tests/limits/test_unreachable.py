"""A limits store that cannot be reached at all (nothing listens at its address): every decision
is made at once, calls of tools that write are refused, every other call and every failed
authentication is limited by the replica's own buckets at the configured rates."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_core.db import Pool, create_pool
from nemo_testing.ports import free_port
from nemo_toolplane.limits.auth_failures import FailedAuthentications
from nemo_toolplane.limits.calls import CallLimit, CallLimiter
from nemo_toolplane.limits.shared import Bucket, BucketsUnavailable, SharedBuckets
from nemo_toolplane.principal import Principal

#: Slow enough that nothing refills while a test runs.
STILL = 1e-6


@pytest.fixture
async def unreachable() -> AsyncIterator[Pool]:
    """A pool whose every connection attempt is refused (no server at the port)."""
    pool = await create_pool(
        f"postgresql://nemo_toolplane@127.0.0.1:{free_port()}/nemo", min_size=0, max_size=2
    )
    yield pool
    await pool.close()


async def test_an_unreachable_store_is_unavailable(unreachable: Pool) -> None:
    store = SharedBuckets(unreachable, timeout=30)
    with pytest.raises(BucketsUnavailable):
        await store.take([Bucket("any", 1.0, 1)])


_AGENTS = st.sampled_from(["agent-a", "agent-b"])
_USERS = st.sampled_from(["U-1", "U-2", None])
_TOOLS = st.sampled_from([("docs.search_docs", False), ("application.set_status", True)])
_CALLS = st.lists(st.tuples(_AGENTS, _USERS, _TOOLS), min_size=1, max_size=40)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(agent_burst=st.integers(1, 6), user_burst=st.integers(1, 6), calls=_CALLS)
async def test_writes_are_refused_and_reads_limited_by_the_replica(
    unreachable: Pool,
    agent_burst: int,
    user_burst: int,
    calls: list[tuple[str, str | None, tuple[str, bool]]],
) -> None:
    limiter = CallLimiter(
        [
            CallLimit(per=("agent",), per_second=STILL, burst=agent_burst),
            CallLimit(per=("agent", "user"), per_second=STILL, burst=user_burst),
        ],
        SharedBuckets(unreachable, timeout=30),
    )
    by_agent: Counter[str] = Counter()
    by_user: Counter[tuple[str, str]] = Counter()
    for n, (agent, user, (tool, writes)) in enumerate(calls):
        admission = await limiter.admit(
            Principal(agent, "S-unreachable", user, f"REQ-{n}"), tool, writes=writes
        )
        if writes:
            assert not admission.admitted
            assert admission.unavailable
            continue
        # All or nothing on this replica's buckets, as the shared store would decide.
        expected = by_agent[agent] < agent_burst and (
            user is None or by_user[agent, user] < user_burst
        )
        assert admission.admitted is expected, (n, by_agent, by_user)
        assert admission.local
        if expected:
            by_agent[agent] += 1
            if user is not None:
                by_user[agent, user] += 1
        else:
            assert admission.limit is not None
            assert admission.retry_after > 0


@given(per_minute=st.integers(1, 20), failures=st.integers(1, 40))
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
async def test_failed_authentications_are_limited_by_the_replica(
    unreachable: Pool, per_minute: int, failures: int
) -> None:
    limiter = FailedAuthentications(SharedBuckets(unreachable, timeout=30), per_minute)
    answers = [await limiter.charge("203.0.113.9") for _ in range(failures)]
    # The first per_minute failures are answered "unauthenticated", the rest "too many".
    assert [answer is None for answer in answers] == [n < per_minute for n in range(failures)]
    assert all(answer > 0 for answer in answers if answer is not None)
    # Another address has its own bucket.
    assert await limiter.charge("198.51.100.4") is None
