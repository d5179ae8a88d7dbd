"""``nemo purge`` on a database with expired rows in every store removes exactly those: one test
per row of the retention table, and a table row without its test fails here.

Every store gets an expired row (or object) and rows that must stay (recent, or protected by the
rule: an approval still pending, an answered item, a key still in use). The whole purge runs
once on a database of this module's own; a second run finds nothing left to do.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import secrets
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nemo_context import repository
from nemo_context.repository import circle_of, linked_identifiers
from nemo_context.rights.ledger import LedgerEntry, read_entries, write_entry
from nemo_context.rights.retention import CACHE_TTL_SETTING, RETENTION, Expiry, retention_rule
from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY
from nemo_context.snapshots.keys import DataKeys
from nemo_context.snapshots.objects import LocalDirectoryObjects
from nemo_context.snapshots.store import DigestedSnapshotStore, SnapshotOwner, persist_snapshot
from nemo_core.db import Connection, connect, create_pool, dsn_with, learner_transaction
from nemo_gateway.settings import GatewaySettings
from nemo_ops.migrate import migrate, role_passwords_from_env
from nemo_ops.purge import PURGES, PurgeRun, purge
from nemo_ops.seed import seed
from nemo_protos.context.v1 import learner_context_pb2 as lc
from ops.tests.rights_population import IDENTITIES

DatabaseFactory = Callable[[], Awaitable[str]]
#: The identifier key the demo seed registers.
TEST_IDENTIFIER_KEY = DEVELOPMENT_IDENTIFIER_KEY.encode()
NOW = datetime.now(UTC)
SNAPSHOT_DAYS = 30


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


@dataclass
class Planted:
    """What was planted in each store: ``gone`` must be purged, ``kept`` must stay."""

    gone: dict[str, list[Any]] = field(default_factory=dict)
    kept: dict[str, list[Any]] = field(default_factory=dict)
    first_run: dict[str, int] = field(default_factory=dict)
    second_run: dict[str, int] = field(default_factory=dict)
    dsn: str = ""
    objects: LocalDirectoryObjects | None = None


async def _snapshots(
    owner: Connection, dsn: str, objects: LocalDirectoryObjects, planted: Planted
) -> None:
    pool = await create_pool(dsn_with(dsn, user="nemo_context"), max_size=1)
    try:
        written = {}
        for name, when in (("old", ago(SNAPSHOT_DAYS + 5)), ("new", NOW)):
            store = DigestedSnapshotStore(
                objects, pool, keys=DataKeys(pool, IDENTITIES.master), write_timeout_seconds=10,
                clock=functools.partial(lambda moment: moment, when),
            )  # fmt: skip
            ref = IDENTITIES.pseudonyms.learner_ref(f"L-purge-{name}-1")
            bundle = lc.ContextBundle(learner_ref=ref, purpose="tutor_hint")
            stored = await persist_snapshot(store, SnapshotOwner(f"L-purge-{name}-1", ref), bundle)
            assert stored is not None
            written[name] = stored.input_ref
    finally:
        await pool.close()
    planted.gone["snapshots"] = [written["old"]]
    planted.kept["snapshots"] = [written["new"]]
    # Keys: one unused and old (gone), one old but sealing the recent snapshot (kept).
    unused = secrets.token_hex(32)
    await owner.execute(
        "INSERT INTO learning.snapshot_keys (subject, id, wrapped, created_at)"
        " VALUES ($1, $2, $3, $4)",
        unused, uuid.uuid4(), secrets.token_bytes(60), ago(SNAPSHOT_DAYS + 1),
    )  # fmt: skip
    in_use = await owner.fetchval(
        "SELECT key_id FROM learning.context_snapshots WHERE input_ref = $1", written["new"]
    )
    await owner.execute(
        "UPDATE learning.snapshot_keys SET created_at = $2 WHERE id = $1", in_use, ago(400)
    )
    planted.gone["snapshot_keys"] = [unused]
    planted.kept["snapshot_keys"] = [
        await owner.fetchval("SELECT subject FROM learning.snapshot_keys WHERE id = $1", in_use)
    ]


async def _conversations(owner: Connection, planted: Planted) -> None:
    sessions = {}
    for name, when in (("old", ago(181)), ("new", ago(179))):
        session = f"CS-purge-{name}-{secrets.token_hex(3)}"
        await owner.execute(
            "INSERT INTO learning.chat_sessions (id, learner_id, updated_at)"
            " VALUES ($1, 'L-2041-1', $2)",
            session, when,
        )  # fmt: skip
        await owner.execute(
            "INSERT INTO learning.chat_messages (session_id, learner_id, turn_id, seq, role, type,"
            " status, content) VALUES ($1, 'L-2041-1', 'T1', 1, 'user', 'text', 'completed', 'a')",
            session,
        )
        sessions[name] = session
    planted.gone["conversations"] = [sessions["old"]]
    planted.kept["conversations"] = [sessions["new"]]


async def _generated_items(owner: Connection, planted: Planted) -> None:
    node = await owner.fetchval("SELECT id FROM knowledge.nodes ORDER BY id LIMIT 1")
    items = {}
    for name, when in (("old", ago(366)), ("answered", ago(366)), ("new", ago(364))):
        item = f"gen-purge-{name}-{secrets.token_hex(3)}"
        await owner.execute(
            "INSERT INTO knowledge.items (id, node_id, kind, stem, rubric, origin, generated_by,"
            " created_at) VALUES ($1, $2, 'short_answer', 'câu hỏi', 'đáp án', 'generated',"
            " 'coral.generate_items@2', $3)",
            item, node, when,
        )  # fmt: skip
        items[name] = item
    await owner.execute(
        "INSERT INTO learning.evidence (learner_id, node_id, item_id, correct, reliability)"
        " VALUES ('L-2041-1', $1, $2, true, 0.8)",
        node, items["answered"],
    )  # fmt: skip
    planted.gone["generated_items"] = [items["old"]]
    planted.kept["generated_items"] = [items["answered"], items["new"]]


async def _audit_rows(owner: Connection, planted: Planted) -> None:
    ids = {}
    for name, when in (("old", ago(366)), ("new", ago(364))):
        ids[name] = await owner.fetchval(
            "INSERT INTO toolplane.audit_logs (request_id, \"timestamp\", agent_id, user_id,"
            " tool_id, resource, decision, status, environment, input_ref, token_id, session_id,"
            " credential_kind, subject)"
            " VALUES ($1, $2, 'learning-agent', 'U-2041-P1', 'learner.get_profile:v1',"
            " 'learner:L-2041-1', 'allow', 'success', 'development', $3, $4, 'mcp-session-1',"
            " 'oauth', 'U-2041-P1')"
            " RETURNING id",
            f"req-{secrets.token_hex(3)}", when,
            f"ai-context/2026-01-01/nemo_{'0' * 24}/{uuid.uuid4()}.json", str(uuid.uuid4()),
        )  # fmt: skip
    planted.gone["audit_rows"] = [ids["old"]]
    planted.kept["audit_rows"] = [ids["new"]]


async def _approvals(owner: Connection, planted: Planted) -> None:
    # A pending approval counts from its expiry: nobody marks it expired unless it is touched.
    ids = {}
    for name, status, created, expires in (
        ("old", "rejected", ago(91), ago(91)),
        ("new", "rejected", ago(89), ago(89)),
        ("pending, expired long ago", "pending", ago(92), ago(91)),
        ("pending, expired lately", "pending", ago(92), ago(89)),
        ("pending, requested long ago", "pending", ago(91), NOW + timedelta(hours=1)),
    ):
        arguments = json.dumps({"learner_id": "L-2041-1", "n": name}, separators=(",", ":"))
        decided = status != "pending"
        ids[name] = await owner.fetchval(
            "INSERT INTO toolplane.approvals (agent_id, user_id, tool_id, arguments_digest,"
            " arguments_json, policy_version, status, request_id, expires_at, created_at,"
            " decided_by, decided_at) VALUES ('learning-agent', 'U-2041-P1',"
            " 'learner.update_goal:v1', $1, $2, $6, $3, 'req', $4, $8, $5, $7) RETURNING id",
            hashlib.sha256(arguments.encode()).hexdigest(), arguments, status, expires,
            "ops-1" if decided else None, f"p-{secrets.token_hex(3)}",
            created if decided else None, created,
        )  # fmt: skip
    planted.gone["approvals"] = [ids["old"], ids["pending, expired long ago"]]
    planted.kept["approvals"] = [
        ids["new"], ids["pending, expired lately"], ids["pending, requested long ago"]
    ]  # fmt: skip


async def _agent_tokens(owner: Connection, planted: Planted) -> None:
    ids = {}
    for name, user, revoked in (
        ("old", "U-2041-P1", ago(91)),
        ("new", "U-2041-P1", ago(89)),
        ("unbound", None, ago(400)),
    ):
        ids[name] = await owner.fetchval(
            "INSERT INTO toolplane.agent_tokens (agent_id, token_hash, user_id, revoked_at)"
            " VALUES ('learning-agent', $1, $2, $3) RETURNING id",
            secrets.token_hex(32), user, revoked,
        )  # fmt: skip
    planted.gone["agent_tokens"] = [ids["old"]]
    planted.kept["agent_tokens"] = [ids["new"], ids["unbound"]]


async def _rate_buckets(owner: Connection, planted: Planted) -> None:
    keys = {}
    for name, full_at in (("full", ago(0.01)), ("filling", NOW + timedelta(minutes=5))):
        keys[name] = json.dumps(["calls", name, secrets.token_hex(3)])
        await owner.execute(
            "INSERT INTO toolplane.rate_buckets (key, tokens, updated, full_at)"
            " VALUES ($1, 1, $2, $3)",
            keys[name], NOW, full_at,
        )  # fmt: skip
    planted.gone["rate_buckets"] = [keys["full"]]
    planted.kept["rate_buckets"] = [keys["filling"]]


async def _rights(owner: Connection, objects: LocalDirectoryObjects, planted: Planted) -> None:
    requests = {}
    for name, completed, state in (
        ("old", ago(3 * 365 + 1), "completed"),
        ("new", ago(3 * 365 - 1), "completed"),
        ("open", None, "received"),
    ):
        request = f"R-purge-{name}-{secrets.token_hex(3)}"
        received = completed or ago(4 * 365)
        await owner.execute(
            "INSERT INTO rights.requests (id, kind, subject, requested_by, requested_via, state,"
            " received_at, acknowledge_by, complete_by, completed_at)"
            " VALUES ($1, 'export', $2, 'U-2041-P1', 'test', $3, $4, $4, $4, $5)",
            request, secrets.token_hex(32), state, received, completed,
        )  # fmt: skip
        requests[name] = request
    planted.gone["rights_requests"] = [requests["old"]]
    planted.kept["rights_requests"] = [requests["new"], requests["open"]]
    ledgered = {}
    for name, when in (("old", ago(401)), ("new", ago(399))):
        entry = LedgerEntry(
            f"E-purge-{name}-{secrets.token_hex(3)}", secrets.token_hex(32), (), when
        )
        await write_entry(objects, entry)
        await owner.execute(
            "INSERT INTO rights.blocks (subject, kind, request_id, since)"
            " VALUES ($1, 'erased', $2, $3)",
            entry.subject, entry.request_id, when,
        )  # fmt: skip
        ledgered[name] = entry.request_id
    planted.gone["erasure_ledger"] = [ledgered["old"]]
    planted.kept["erasure_ledger"] = [ledgered["new"]]


@pytest.fixture(scope="module")
def planted(
    make_empty_database: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Planted:
    """Every store planted, then purged twice."""
    directory = tmp_path_factory.mktemp("purge-snapshots")

    async def plant_and_purge() -> Planted:
        dsn = await make_empty_database()
        await migrate(dsn, role_passwords=role_passwords_from_env(os.environ))
        await seed(dsn)
        objects = LocalDirectoryObjects(directory)
        planted = Planted(dsn=dsn, objects=objects)
        owner = await connect(dsn)
        await _snapshots(owner, dsn, objects, planted)
        await _conversations(owner, planted)
        await _generated_items(owner, planted)
        await _audit_rows(owner, planted)
        await _approvals(owner, planted)
        await _agent_tokens(owner, planted)
        await _rate_buckets(owner, planted)
        await _rights(owner, objects, planted)
        planted.kept["learner_record"] = [
            row["id"] for row in await owner.fetch("SELECT id FROM learning.learners")
        ]
        await owner.execute(
            "UPDATE learning.learners SET created_at = $1, updated_at = $1", ago(3650)
        )
        run = PurgeRun(owner, objects, NOW, SNAPSHOT_DAYS, lambda _line: None)
        planted.first_run = await purge(run)
        planted.second_run = await purge(run)
        await owner.close()
        return planted

    return asyncio.run(plant_and_purge())


async def _present(planted: Planted, store: str, values: list[Any]) -> list[Any]:
    """Which of ``values`` are still in ``store`` (for audit rows: still linked)."""
    conn = await connect(planted.dsn)
    try:
        return [value for value in values if await _is_present(conn, planted, store, value)]
    finally:
        await conn.close()


QUERIES = {
    "snapshots": "SELECT count(*) FROM learning.context_snapshots WHERE input_ref = $1",
    "snapshot_keys": "SELECT count(*) FROM learning.snapshot_keys WHERE subject = $1",
    "conversations": "SELECT count(*) FROM learning.chat_messages WHERE session_id = $1",
    "generated_items": "SELECT count(*) FROM knowledge.items WHERE id = $1",
    "audit_rows": "SELECT count(*) FROM toolplane.audit_logs WHERE id = $1"
    " AND (resource = 'learner:L-2041-1' OR user_id IS NOT NULL OR subject IS NOT NULL"
    " OR input_ref IS NOT NULL)",
    "approvals": "SELECT count(*) FROM toolplane.approvals WHERE id = $1",
    "agent_tokens": "SELECT count(*) FROM toolplane.agent_tokens WHERE id = $1",
    "rate_buckets": "SELECT count(*) FROM toolplane.rate_buckets WHERE key = $1",
    "rights_requests": "SELECT count(*) FROM rights.requests WHERE id = $1",
    "erasure_ledger": "SELECT count(*) FROM rights.blocks WHERE request_id = $1",
    "learner_record": "SELECT count(*) FROM learning.learners WHERE id = $1",
}


#: Stores in a service's memory: each evicts by itself, tested below against its row.
IN_MEMORY = {rule.store for rule in RETENTION if rule.on_expiry is Expiry.EVICT}


async def _is_present(conn: Connection, planted: Planted, store: str, value: Any) -> bool:
    if store in IN_MEMORY:
        return True
    found = bool(await conn.fetchval(QUERIES[store], value))
    assert planted.objects is not None
    if store == "snapshots":
        on_disk = (planted.objects._root / value).exists()
        assert found == on_disk, "a digest row and its object go together"
    if store == "erasure_ledger":
        in_ledger = value in {entry.request_id for entry in await read_entries(planted.objects)}
        assert found == in_ledger, "a ledger entry and its tombstone go together"
    return found


def test_every_row_of_the_retention_table_is_purged_and_tested() -> None:
    stores = [rule.store for rule in RETENTION]
    assert sorted(PURGES) == sorted(stores)
    assert sorted(QUERIES) == sorted(set(stores) - IN_MEMORY)
    assert {"result_cache", "circle_fingerprints"} == IN_MEMORY


@pytest.mark.parametrize("store", [rule.store for rule in RETENTION])
async def test_purge_removes_exactly_the_expired_rows_of(planted: Planted, store: str) -> None:
    gone = planted.gone.get(store, [])
    kept = planted.kept.get(store, [])
    assert await _present(planted, store, gone) == []
    assert await _present(planted, store, kept) == kept
    assert planted.second_run[store] == 0  # nothing left: running again is harmless


def test_the_result_cache_is_kept_no_longer_than_its_row_says() -> None:
    rule = retention_rule("result_cache")
    assert rule.setting == CACHE_TTL_SETTING
    default = GatewaySettings.model_fields["cache_ttl_seconds"].default
    assert f"({int(default)} seconds)" in rule.period


async def test_the_circle_cache_is_kept_no_longer_than_its_row_says(context_dsn: str) -> None:
    rule = retention_rule("circle_fingerprints")
    assert rule.seconds is not None
    pool = await create_pool(context_dsn, max_size=1)
    try:
        key = TEST_IDENTIFIER_KEY
        cached = repository._circles
        async with learner_transaction(pool, ["L-2041-1"], readonly=True) as conn:
            linked = await linked_identifiers(conn, "L-2041-1")
            entry = (key, "L-2041-1", linked)
            cached.pop(entry, None)  # read by an earlier test of this process
            circle = await circle_of(conn, "L-2041-1", key, linked)
    finally:
        await pool.close()
    assert not circle.empty
    # Still held just before its period ends, dropped (not only unused) at its end.
    cached.expire(cached.timer() + rule.seconds - 1)
    assert entry in cached
    expired = dict(cached.expire(cached.timer() + rule.seconds))
    assert entry in expired
    assert entry not in cached
