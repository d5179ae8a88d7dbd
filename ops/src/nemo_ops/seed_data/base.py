"""Shared pieces of the demo data set: the fixed clock and the table container."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

#: The moment the demo data describes ("now" for its learners). Fixed rather than the clock, so
#: loading the set twice gives identical rows.
DEMO_NOW = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)  # 09:00 in Vietnam


def at(days: float = 0, hours: float = 0, minutes: float = 0) -> datetime:
    """A timestamp relative to :data:`DEMO_NOW` (negative values are in the past)."""
    return DEMO_NOW + timedelta(days=days, hours=hours, minutes=minutes)


@dataclass(frozen=True)
class TableData:
    """Rows of one table, upserted on ``key`` (its primary key or a unique constraint)."""

    table: str
    key: tuple[str, ...]
    rows: tuple[Mapping[str, object], ...]
