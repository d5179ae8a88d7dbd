"""The only module that reads learner data for bundles.

Rules every statement here keeps (tests record each statement and its parameters):

- it binds exactly the requested learner as ``$1`` and runs inside
  :func:`nemo_core.db.learner_transaction` bound to that learner, so row-level security hides
  every other learner even if a ``WHERE`` were forgotten;
- it never joins towards other learners (family, class); the family and guardian relations are
  read only to learn which user ids the identifier gate must forbid (:data:`LINKED_IDS_SQL`);
- it names its columns and never selects a descriptive identifier or ``payload_json`` (the
  ``nemo_context`` role has no privilege on them anyway); age comes from the definer function
  ``learning.learner_age_years``, in whole years;
- computed learner models are read as the engines stored them (latest version per kind), never
  recomputed; a missing value stays ``NULL``/absent, never 0;
- it reads the learner as of the build's reference time ``$2`` (the request's ``evaluate_time``,
  or the server's clock): evidence, goals and computed models recorded after it are left out,
  the last-7-days window ends at it. The age is as of the server's date whatever the reference
  time, so no choice of time tells more than the current age (migration 0022). Mastery and
  retention are kept as current state only (the engines overwrite them), so they are read as
  they are.

One purpose is read in one statement: the base row of the learner plus one scalar subquery per
declared slice, each returning JSON. A build therefore costs one round trip for the data, however
many slices the purpose declares. Statements are composed from the fragments below per purpose
and cached; the fragments are the readable part.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any, Final, Protocol

import asyncpg
from cachetools import TTLCache

from nemo_context.gate.circle import Circle
from nemo_context.purposes import Purpose, Slice
from nemo_core.db import Connection, Pool, learner_transaction

JsonObject = Mapping[str, Any]

LINKED_IDS_SQL: Final = """ARRAY(
        SELECT l.id
        UNION SELECT l.family_id
        UNION SELECT l.user_id WHERE l.user_id IS NOT NULL
        UNION SELECT fm.user_id FROM learning.family_members AS fm
            WHERE fm.family_id = (SELECT family_id FROM learning.learners WHERE id = $1)
        UNION SELECT g.user_id FROM learning.guardians AS g WHERE g.learner_id = $1
        UNION SELECT ma.mentor_user_id FROM learning.mentor_assignments AS ma
            WHERE ma.learner_id = $1
        UNION SELECT fk.key FROM learning.family_learner_keys AS fk WHERE fk.learner_id = $1
    )"""
"""Keys that must never leave the service for this learner: the learner's id, family id and own
user id, the ids of the users linked to the learner (family members, guardians, mentors with
an assignment in any status), and its siblings' learner and user ids. Evaluated in a statement
whose ``l`` is the learner row."""

CIRCLE_SQL: Final = "SELECT kind, fingerprints FROM learning.circle_fingerprints($1, $2)"
"""Keyed fingerprints of the identifiers of the learner's circle (``$2`` is the identifier key),
never the identifiers themselves: see ``nemo_context.gate.circle``."""

CIRCLE_TTL_SECONDS: Final = 60.0
"""How long the fingerprints of a circle are reused. The database derives them from every
identifier of every person around the learner, several milliseconds of its CPU; reused, a build
costs it nothing more. A person linked to or unlinked from the learner changes the linked keys,
which every build reads, and a new circle is read at once; an edited name, phone or address is
matched from at most this long after the edit."""
CIRCLE_CACHE_SIZE: Final = 10_000

# Titles of every knowledge node a computed model mentions, wherever in its JSON the id sits.
_MODEL_NODE_TITLES: Final = """(
            SELECT coalesce(json_object_agg(n.id, n.title), '{}'::json)
            FROM knowledge.nodes AS n
            WHERE n.id IN (SELECT jsonb_path_query(v.model_json, 'strict $.**') #>> '{}')
        )"""

_MODEL_KINDS: Final[Mapping[Slice, str]] = {
    Slice.LEARNING_CONTEXT: "context",
    Slice.LEARNING_PROGRESS: "progress",
    Slice.COMPETENCY_PROFILE: "competency",
    Slice.READINESS: "readiness",
    Slice.CURRENT_PLAN: "current_plan",
    Slice.NEXT_EXPERIENCE: "next_experience",
}
"""Slices read from the engines' computed learner models, and the model kind each reads."""


def _model_sql(kind: str) -> str:
    return f"""(
        SELECT json_build_object(
            'version', v.version,
            'engine_version', v.engine_version,
            'computed_at', v.computed_at,
            'model', v.model_json,
            'node_titles', {_MODEL_NODE_TITLES}
        )
        FROM learning.learner_model_versions AS v
        WHERE v.learner_id = $1 AND v.kind = '{kind}' AND v.computed_at <= $2
        ORDER BY v.version DESC
        LIMIT 1
    )"""


def _mastery_sql(limit: int) -> str:
    # Weakest first; the node id breaks ties so the cut is deterministic.
    return f"""(
        SELECT coalesce(json_agg(json_build_object(
            'node_id', m.node_id, 'node_title', n.title, 'mastery', m.mastery,
            'confidence', m.confidence, 'coverage', m.coverage,
            'evidence_count', m.evidence_count
        ) ORDER BY m.mastery, m.node_id), '[]'::json)
        FROM (
            SELECT node_id, mastery, confidence, coverage, evidence_count
            FROM learning.mastery
            WHERE learner_id = $1
            ORDER BY mastery, node_id
            LIMIT {int(limit)}
        ) AS m
        JOIN knowledge.nodes AS n ON n.id = m.node_id
    )"""


def _evidence_sql(limit: int) -> str:
    # correct and reliability only: payload_json (the child's verbatim answer) is never read.
    return f"""(
        SELECT coalesce(json_agg(json_build_object(
            'node_id', e.node_id, 'correct', e.correct, 'reliability', e.reliability,
            'observed_at', e.created_at
        ) ORDER BY e.created_at DESC, e.id), '[]'::json)
        FROM (
            SELECT id, node_id, correct, reliability, created_at
            FROM learning.evidence
            WHERE learner_id = $1 AND created_at <= $2
            ORDER BY created_at DESC, id
            LIMIT {int(limit)}
        ) AS e
    )"""


def _retention_sql(limit: int) -> str:
    return f"""(
        SELECT coalesce(json_agg(json_build_object(
            'node_id', r.node_id, 'node_title', n.title, 'due_at', r.due_at,
            'strength', r.strength
        ) ORDER BY r.due_at, r.node_id), '[]'::json)
        FROM (
            SELECT node_id, due_at, strength
            FROM learning.retention
            WHERE learner_id = $1
            ORDER BY due_at, node_id
            LIMIT {int(limit)}
        ) AS r
        JOIN knowledge.nodes AS n ON n.id = r.node_id
    )"""


# The current goal: the active goal the engine's latest context model points at, otherwise the
# active goal due soonest.
_GOAL_SQL: Final = """(
        SELECT json_build_object('title', g.title, 'target', g.target, 'due_on', g.due_on)
        FROM learning.goals AS g
        WHERE g.learner_id = $1 AND g.status = 'active' AND g.created_at <= $2
        ORDER BY g.id = (
                SELECT v.model_json ->> 'active_goal_id'
                FROM learning.learner_model_versions AS v
                WHERE v.learner_id = $1 AND v.kind = 'context' AND v.computed_at <= $2
                ORDER BY v.version DESC
                LIMIT 1
            ) DESC NULLS LAST,
            g.due_on NULLS LAST, g.created_at DESC, g.id
        LIMIT 1
    )"""

# Every node's (mastery, confidence), so the builder can count nodes per knowledge state.
_NODE_MEASURES_SQL: Final = """(
        SELECT coalesce(
            json_agg(json_build_array(m.mastery, m.confidence) ORDER BY m.node_id), '[]'::json
        )
        FROM learning.mastery AS m
        WHERE m.learner_id = $1
    )"""

_EVIDENCE_ACTIVITY_SQL: Final = """(
        SELECT json_build_object(
            'last_7_days',
                count(*) FILTER (WHERE e.created_at > $2::timestamptz - interval '7 days'),
            'last_activity_at', max(e.created_at)
        )
        FROM learning.evidence AS e
        WHERE e.learner_id = $1 AND e.created_at <= $2
    )"""


@dataclass(frozen=True)
class LearnerRecord:
    """What the repository read for one purpose: JSON-like values, as the statement returned them.

    Only the slices the purpose declares are filled; the rest keep their empty defaults.
    """

    grade: int
    linked_ids: frozenset[str]
    """Keys the identifier gate must forbid (see :data:`LINKED_IDS_SQL`)."""
    age_years: int | None = None
    mastery: Sequence[JsonObject] = ()
    evidence: Sequence[JsonObject] = ()
    goal: JsonObject | None = None
    retention: Sequence[JsonObject] = ()
    node_measures: Sequence[Sequence[float | None]] = ()
    evidence_activity: JsonObject | None = None
    models: Mapping[str, JsonObject] = field(default_factory=dict)
    """Latest computed model per kind: version, engine_version, computed_at, model, node_titles."""
    circle: Circle = field(default_factory=lambda: Circle(key=b""))
    """Fingerprints of the identifiers around the learner (see :func:`circle_of`)."""
    columns: tuple[str, ...] = ()
    """Every column the statement returned, including any the builder does not copy: a column
    with a forbidden name fails the build instead of being dropped unseen."""


#: Runs first in the transaction that reads the learner, on its connection; raising refuses the
#: read (an agent view's access check: it then sees the same snapshot of the data as the read).
ReadCheck = Callable[[Connection], Awaitable[None]]


class LearnerRepository(Protocol):
    """Reads what one purpose may see of one learner (the seam tests inject other sources at)."""

    async def read(
        self, learner_id: str, purpose: Purpose, as_of: datetime, *, check: ReadCheck | None = None
    ) -> LearnerRecord | None:
        """The learner's data for ``purpose`` as of ``as_of``; None when the learner does not
        exist. ``check`` runs first, in the same transaction."""


@lru_cache(maxsize=64)
def statement_for(purpose: Purpose) -> str:
    """The one statement that reads ``purpose``'s slices, with the learner as ``$1`` and the
    reference time (timestamptz) as ``$2``."""
    columns = ["l.grade", f"{LINKED_IDS_SQL} AS linked_ids"]
    if purpose.declares(Slice.AGE):
        # As of the server's date, whatever the reference time: see migration 0022.
        columns.append("learning.learner_age_years($1) AS age_years")
    if purpose.declares(Slice.MASTERY):
        columns.append(f"{_mastery_sql(purpose.mastery_limit)} AS mastery")
    if purpose.declares(Slice.RECENT_EVIDENCE):
        columns.append(f"{_evidence_sql(purpose.evidence_limit)} AS evidence")
    if purpose.declares(Slice.GOAL):
        columns.append(f"{_GOAL_SQL} AS goal")
    if purpose.declares(Slice.RETENTION):
        columns.append(f"{_retention_sql(purpose.retention_limit)} AS retention")
    if purpose.declares(Slice.LEARNING_PROGRESS):
        columns.append(f"{_NODE_MEASURES_SQL} AS node_measures")
        columns.append(f"{_EVIDENCE_ACTIVITY_SQL} AS evidence_activity")
    for slice_, kind in _MODEL_KINDS.items():
        if purpose.declares(slice_):
            columns.append(f"{_model_sql(kind)} AS model_{kind}")
    select = ",\n    ".join(columns)
    # Every statement takes the reference time, whether or not its slices read it.
    return (
        f"SELECT\n    {select}\nFROM learning.learners AS l\n"
        "WHERE l.id = $1 AND $2::timestamptz IS NOT NULL"
    )


def _record(row: asyncpg.Record, circle: Circle) -> LearnerRecord:
    models = {
        kind: row[f"model_{kind}"]
        for kind in _MODEL_KINDS.values()
        if row.get(f"model_{kind}") is not None
    }
    return LearnerRecord(
        grade=row["grade"],
        linked_ids=frozenset(row["linked_ids"]),
        circle=circle,
        age_years=row.get("age_years"),
        mastery=row.get("mastery") or (),
        evidence=row.get("evidence") or (),
        goal=row.get("goal"),
        retention=row.get("retention") or (),
        node_measures=row.get("node_measures") or (),
        evidence_activity=row.get("evidence_activity"),
        models=models,
        columns=tuple(row.keys()),
    )


class PostgresLearnerRepository:
    """:class:`LearnerRepository` over PostgreSQL as the ``nemo_context`` role."""

    def __init__(
        self,
        pool: Pool,
        *,
        identifier_key: bytes,
        statements: Callable[[Purpose], str] = statement_for,
    ) -> None:
        self._pool = pool
        self._identifier_key = identifier_key
        self._statements = statements
        """The statement of each purpose (tests substitute a broken one)."""

    async def read(
        self, learner_id: str, purpose: Purpose, as_of: datetime, *, check: ReadCheck | None = None
    ) -> LearnerRecord | None:
        async with learner_transaction(self._pool, [learner_id], readonly=True) as conn:
            if check is not None:
                await check(conn)
            row = await conn.fetchrow(self._statements(purpose), learner_id, as_of)
            if row is None:
                return None
            linked = frozenset(row["linked_ids"])
            circle = await circle_of(conn, learner_id, self._identifier_key, linked)
        return _record(row, circle)


async def linked_identifiers(conn: Connection, learner_id: str) -> frozenset[str]:
    """The keys the identifier gate must forbid for ``learner_id``: its own id, family id and
    user id, and the ids of the users linked to it. Empty when the learner is not visible.

    ``conn`` must be in a transaction bound to the learner (``learner_transaction``).
    """
    ids: list[str] | None = await conn.fetchval(
        f"SELECT {LINKED_IDS_SQL} FROM learning.learners AS l WHERE l.id = $1", learner_id
    )
    return frozenset(ids or ())


# Expired entries are dropped whenever another circle is stored, not only replaced: the cache
# is the row "circle_fingerprints" of the retention table, and holds nothing past its period.
_circles: TTLCache[tuple[bytes, str, frozenset[str]], Circle] = TTLCache(
    CIRCLE_CACHE_SIZE, CIRCLE_TTL_SECONDS
)


async def circle_of(
    conn: Connection, learner_id: str, identifier_key: bytes, linked_ids: frozenset[str]
) -> Circle:
    """The fingerprints of the identifiers around ``learner_id`` (see :data:`CIRCLE_SQL`),
    reused for :data:`CIRCLE_TTL_SECONDS` while its ``linked_ids`` stay the same; ``conn`` must
    be in a transaction bound to the learner."""
    key = (identifier_key, learner_id, linked_ids)
    cached = _circles.get(key)
    if cached is not None:
        return cached
    rows = await conn.fetch(CIRCLE_SQL, learner_id, identifier_key)
    circle = Circle.from_rows(identifier_key, [(row["kind"], row["fingerprints"]) for row in rows])
    _circles[key] = circle
    return circle
