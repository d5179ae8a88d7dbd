"""A request's clocks: acknowledged within 2 working days (Monday to Friday, in Vietnam),
completed within 15 days; overdue ones are listed first."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime, time, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_context.rights import requests
from nemo_context.rights.requests import (
    WORKING_TIMEZONE,
    Kind,
    RequestError,
    State,
    add_working_days,
    deadlines,
)
from nemo_core.db import Connection, connect

MOMENTS = st.datetimes(
    min_value=datetime(2020, 1, 1),  # noqa: DTZ001  hypothesis takes naive bounds
    max_value=datetime(2035, 12, 31),  # noqa: DTZ001
    timezones=st.just(UTC),
)


def working_time_between(start: datetime, end: datetime) -> timedelta:
    """How much of (start, end] falls on Monday to Friday in Vietnam."""
    local_start, local_end = start.astimezone(WORKING_TIMEZONE), end.astimezone(WORKING_TIMEZONE)
    total = timedelta()
    day = local_start.date()
    while day <= local_end.date():
        if day.weekday() < 5:
            opens = datetime.combine(day, time.min, WORKING_TIMEZONE)
            closes = opens + timedelta(days=1)
            total += max(timedelta(), min(closes, local_end) - max(opens, local_start))
        day += timedelta(days=1)
    return total


@given(received=MOMENTS)
def test_acknowledge_by_is_two_working_days_later(received: datetime) -> None:
    acknowledge_by, complete_by = deadlines(received)
    local = acknowledge_by.astimezone(WORKING_TIMEZONE)
    assert local.weekday() < 5  # a deadline falls on a working day
    assert working_time_between(received, acknowledge_by) == timedelta(days=2)
    assert timedelta(days=2) <= acknowledge_by - received <= timedelta(days=5)
    assert complete_by - received == timedelta(days=15)
    assert acknowledge_by < complete_by


@given(received=MOMENTS, days=st.integers(0, 30))
def test_each_working_day_adds_one_day_of_working_time(received: datetime, days: int) -> None:
    assert working_time_between(received, add_working_days(received, days)) == timedelta(days=days)


@pytest.fixture
async def owner(owner_dsn: str) -> AsyncIterator[Connection]:
    conn = await connect(owner_dsn)
    yield conn
    await conn.execute("DELETE FROM rights.requests WHERE id LIKE 'CLOCK-%'")
    await conn.close()


async def test_overdue_requests_are_listed_first_and_ids_stand_for_one_request(
    owner: Connection,
) -> None:
    now = datetime.now(UTC)
    subject = secrets.token_hex(32)
    made = {}
    for name, received in (
        ("recent", now),
        ("late", now - timedelta(days=20)),
        ("old", now - timedelta(days=3)),
    ):
        made[name] = await requests.open_request(
            owner, f"CLOCK-{name}-{secrets.token_hex(2)}", Kind.ERASURE, subject,
            requested_by="U-2041-P1", requested_via="test", now=received,
        )  # fmt: skip
    await requests.acknowledge(owner, made["old"].request_id, "test", now)
    listed = [
        request.request_id
        for request in await requests.list_requests(owner, now, limit=500)
        if request.request_id.startswith("CLOCK-")
    ]
    assert listed == [made["late"].request_id, made["old"].request_id, made["recent"].request_id]
    assert made["late"].overdue(now)
    assert not made["recent"].overdue(now)
    # The same id again is the same request; for another learner or kind it is refused.
    again = await requests.open_request(
        owner, made["recent"].request_id, Kind.ERASURE, subject,
        requested_by="someone else", requested_via="test", now=now,
    )  # fmt: skip
    assert again == made["recent"]
    with pytest.raises(RequestError):
        await requests.open_request(
            owner, made["recent"].request_id, Kind.EXPORT, subject,
            requested_by="U-2041-P1", requested_via="test", now=now,
        )  # fmt: skip
    await requests.set_state(owner, made["late"].request_id, State.COMPLETED, "test", now=now)
    steps = [event["step"] for event in await requests.events(owner, made["late"].request_id)]
    assert steps == ["received", "completed"]
    assert not (await requests.get_request(owner, made["late"].request_id)).overdue(now)  # type: ignore[union-attr]


@pytest.mark.parametrize("request_id", ["", "ab", "a b", "-lead", "x" * 65, "L/1"])
async def test_request_ids_are_refused_when_they_cannot_name_a_ledger_entry(
    owner: Connection, request_id: str
) -> None:
    with pytest.raises(RequestError):
        await requests.open_request(
            owner, request_id, Kind.EXPORT, secrets.token_hex(32),
            requested_by="-", requested_via="test", now=datetime.now(UTC),
        )  # fmt: skip
