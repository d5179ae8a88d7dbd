"""Token buckets: their rate, and a table that stays within ``max_keys`` whatever comes."""

from __future__ import annotations

import pytest

from nemo_toolplane.limits.local import KeyedRateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_token_buckets_refill_at_their_rate() -> None:
    clock = Clock()
    limiter = KeyedRateLimiter(2, 3, clock=clock)
    assert [limiter.acquire("a") for _ in range(4)] == [True, True, True, False]
    assert limiter.acquire("b")
    assert limiter.retry_after("a") == pytest.approx(0.5)
    clock.now = 0.5
    assert limiter.acquire("a")
    assert not limiter.acquire("a")
    clock.now = 100
    assert [limiter.acquire("a") for _ in range(4)] == [True, True, True, False]


def test_the_table_never_holds_more_than_max_keys_buckets() -> None:
    clock = Clock()
    limiter = KeyedRateLimiter(20 / 60, 20, max_keys=100, clock=clock)
    for n in range(5000):
        clock.now += 0.001  # five seconds in all: no bucket refills in that time
        limiter.acquire(f"10.0.{n // 256}.{n % 256}")
        assert len(limiter._buckets) <= 100
    assert len(limiter._buckets) == 100


def test_asking_about_a_source_creates_no_bucket() -> None:
    # The authentication limiter asks about every failing source but charges only failures:
    # a source that only ever succeeds must cost no memory.
    limiter = KeyedRateLimiter(1, 2, max_keys=10, clock=Clock())
    for n in range(1000):
        assert not limiter.exhausted(f"source-{n}")
        assert limiter.retry_after(f"source-{n}") == 0
    assert len(limiter._buckets) == 0


def test_the_least_recently_used_bucket_is_evicted() -> None:
    clock = Clock()
    limiter = KeyedRateLimiter(1, 1, max_keys=2, clock=clock)
    assert limiter.acquire("a")
    assert limiter.acquire("b")
    assert limiter.exhausted("a")  # a is now more recently used than b
    assert limiter.acquire("c")  # evicts b, not a
    assert set(limiter._buckets) == {"a", "c"}
    assert not limiter.acquire("a")


def test_an_evicted_source_gets_at_most_one_burst_beyond_its_limit() -> None:
    clock = Clock()
    limiter = KeyedRateLimiter(1, 3, max_keys=2, clock=clock)
    assert [limiter.acquire("victim") for _ in range(4)] == [True, True, True, False]
    limiter.acquire("other-1")
    limiter.acquire("other-2")  # the table is full: the victim's bucket goes
    assert "victim" not in limiter._buckets
    # Back with a full bucket: one burst more than its limit allowed, and then limited again.
    assert [limiter.acquire("victim") for _ in range(4)] == [True, True, True, False]
