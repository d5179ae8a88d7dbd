"""Learners with something in every store, for the rights tests: snapshots in a real backend,
chat turns, a generated item they answered, audit rows, approvals, tokens and call counters."""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from nemo_context.pseudonym import Pseudonymizer
from nemo_context.rights.subjects import Identities
from nemo_context.snapshots.keys import DataKeys, MasterKey
from nemo_context.snapshots.objects import SnapshotObjects
from nemo_context.snapshots.store import (
    DigestedSnapshotStore,
    SnapshotOwner,
    canonical_json,
    persist_snapshot,
)
from nemo_core.db import Connection, Pool
from nemo_protos.context.v1 import learner_context_pb2 as lc

MASTER_KEY = "rights-test-master-key-0123456789abcdef012345"
PSEUDONYM_KEY = "rights-test-pseudonym-key-0123456789abcdef012"
IDENTITIES = Identities(MasterKey(MASTER_KEY.encode()), Pseudonymizer(PSEUDONYM_KEY.encode()))
#: The pseudonym key before a rotation: the same learners had other refs under it.
EARLIER_PSEUDONYMS = Pseudonymizer(b"rights-test-earlier-pseudonym-key-0123456789ab")
#: A staff member who acts on learners through an agent: outside every family.
STAFF_USER = "U-2041-S1"
PARENT_USER = "U-2041-P1"


@dataclass
class Learner:
    learner_id: str
    account_id: str
    family_id: str
    input_refs: list[str] = field(default_factory=list)
    plaintexts: dict[str, bytes] = field(default_factory=dict)
    """The canonical JSON each snapshot was written from, by input_ref."""

    @property
    def ref(self) -> str:
        return IDENTITIES.pseudonyms.learner_ref(self.learner_id)

    @property
    def earlier_ref(self) -> str:
        """Its ref under the pseudonym key used before the current one."""
        return EARLIER_PSEUDONYMS.learner_ref(self.learner_id)


def new_learner_id() -> str:
    """A learner key no other test uses (with a digit, as keys must have)."""
    return f"L-{secrets.token_hex(5)}-7"


async def seed_learner(
    owner: Connection,
    context_pool: Pool,
    objects: SnapshotObjects,
    learner_id: str,
    *,
    snapshots: int = 2,
    turns: int = 2,
    calls: int = 2,
    family_id: str | None = None,
    earlier_snapshots: int = 0,
) -> Learner:
    """One learner with rows in every store; ``calls`` audit rows and as many approvals;
    ``earlier_snapshots`` written under its ref of the earlier pseudonym key; in a family of
    its own unless ``family_id`` names one."""
    learner = Learner(learner_id, f"U-{learner_id}", family_id or f"F-{learner_id}")
    await owner.execute(
        "INSERT INTO learning.users (id, role, display_name) VALUES ($1, 'learner', 'Bé Na')",
        learner.account_id,
    )
    if family_id is None:
        await owner.execute(
            "INSERT INTO learning.families (id, name) VALUES ($1, 'Nguyễn')", learner.family_id
        )
        await owner.execute(
            "INSERT INTO learning.family_members (family_id, user_id, relation)"
            " VALUES ($1, $2, 'owner')",
            learner.family_id,
            PARENT_USER,
        )
    await owner.execute(
        "INSERT INTO learning.learners (id, family_id, user_id, grade, first_name)"
        " VALUES ($1, $2, $3, 7, 'Na')",
        learner_id,
        learner.family_id,
        learner.account_id,
    )
    node = await owner.fetchval("SELECT id FROM knowledge.nodes ORDER BY id LIMIT 1")
    await owner.execute(
        "INSERT INTO learning.mastery (learner_id, node_id, mastery, confidence)"
        " VALUES ($1, $2, 0.4, 0.6)",
        learner_id,
        node,
    )
    item_id = f"gen-{secrets.token_hex(6)}"
    await owner.execute(
        "INSERT INTO knowledge.items (id, node_id, kind, stem, rubric, answer_key, origin,"
        " generated_by) VALUES ($1, $2, 'short_answer', 'Tính 2 + 3', 'đúng là 5', '5',"
        " 'generated', 'coral.generate_items@2')",
        item_id,
        node,
    )
    await owner.execute(
        "INSERT INTO learning.evidence (learner_id, node_id, item_id, correct, reliability,"
        ' payload_json) VALUES ($1, $2, $3, true, 0.9, \'{"answer": "5"}\')',
        learner_id,
        node,
        item_id,
    )
    session = f"CS-{secrets.token_hex(6)}"
    await owner.execute(
        "INSERT INTO learning.chat_sessions (id, learner_id, user_id) VALUES ($1, $2, $3)",
        session,
        learner_id,
        learner.account_id,
    )
    for turn in range(turns):
        for seq, role in ((2 * turn + 1, "user"), (2 * turn + 2, "assistant")):
            await owner.execute(
                "INSERT INTO learning.chat_messages (session_id, learner_id, turn_id, seq, role,"
                " type, status, content) VALUES ($1, $2, $3, $4, $5, 'text', 'completed', $6)",
                session,
                learner_id,
                f"T{turn}",
                seq,
                role,
                f"lượt {turn} của {role}",
            )
    await owner.execute(
        "INSERT INTO learning.conversation_state (session_id, learner_id, extracted_info)"
        ' VALUES ($1, $2, \'{"topic": "phân số"}\')',
        session,
        learner_id,
    )
    if turns:
        await owner.execute(
            "INSERT INTO learning.conversation_summaries (session_id, learner_id, version,"
            " summary, covers_through_seq, covered_turns) VALUES ($1, $2, 1, 'tóm tắt', 1, 1)",
            session,
            learner_id,
        )
    await seal_snapshots(context_pool, objects, learner, learner.earlier_ref, earlier_snapshots)
    await seal_snapshots(context_pool, objects, learner, learner.ref, snapshots)
    await _seed_toolplane(owner, learner, calls)
    return learner


async def seal_snapshots(
    context_pool: Pool, objects: SnapshotObjects, learner: Learner, ref: str, count: int
) -> None:
    """``count`` snapshots of ``learner`` under ``ref``, written as the context service writes
    them (sealed under the learner's data key, whatever the ref)."""
    store = DigestedSnapshotStore(
        objects,
        context_pool,
        keys=DataKeys(context_pool, IDENTITIES.master),
        write_timeout_seconds=10,
    )
    for n in range(count):
        bundle = lc.ContextBundle(learner_ref=ref, purpose="tutor_hint", rendered_text=f"#{n}")
        stored = await persist_snapshot(store, SnapshotOwner(learner.learner_id, ref), bundle)
        assert stored is not None
        learner.input_refs.append(stored.input_ref)
        learner.plaintexts[stored.input_ref] = canonical_json(bundle)


async def _seed_toolplane(owner: Connection, learner: Learner, calls: int) -> None:
    now = datetime.now(UTC)
    for n in range(calls):
        acting = (learner.account_id, PARENT_USER, STAFF_USER)[n % 3]
        await owner.execute(
            "INSERT INTO toolplane.audit_logs (request_id, agent_id, user_id, tool_id, resource,"
            " decision, status, environment, input_ref, user_source, metadata, credential_kind,"
            " subject)"
            " VALUES ($1, 'learning-agent', $2, 'learner.get_profile:v1', $3, 'allow', 'success',"
            " 'development', $4, 'token', '{\"rule\": 3}', 'oauth', $2)",
            f"req-{secrets.token_hex(4)}",
            acting,
            f"learner:{learner.learner_id}",
            learner.input_refs[n % len(learner.input_refs)] if learner.input_refs else None,
        )
        arguments = json.dumps(
            {"learner_id": learner.learner_id, "n": n, "nonce": secrets.token_hex(4)},
            separators=(",", ":"),
            sort_keys=True,
        )
        await owner.execute(
            "INSERT INTO toolplane.approvals (agent_id, user_id, tool_id, arguments_digest,"
            " arguments_json, resource, policy_version, request_id, expires_at)"
            " VALUES ('learning-agent', $1, 'learner.update_goal:v1', $2, $3, $4, 'p1', $5, $6)",
            acting,
            hashlib.sha256(arguments.encode()).hexdigest(),
            arguments,
            f"learner:{learner.learner_id}",
            f"req-{secrets.token_hex(4)}",
            now + timedelta(hours=1),
        )
    await owner.execute(
        "INSERT INTO toolplane.agent_tokens (agent_id, token_hash, user_id, label)"
        " VALUES ('learning-agent', $1, $2, 'the learner''s tutor')",
        secrets.token_hex(32),
        learner.account_id,
    )
    await owner.execute(
        "INSERT INTO toolplane.rate_buckets (key, tokens, updated, full_at) VALUES ($1, 1, $2, $3)",
        json.dumps(["calls per user", "learning-agent", learner.account_id]),
        now,
        now + timedelta(minutes=5),
    )


async def table_rows(conn: Connection, schemas: tuple[str, ...]) -> dict[str, list[str]]:
    """Every row of every table of ``schemas``, as JSON text, sorted."""
    tables = await conn.fetch(
        "SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables"
        " WHERE schemaname = ANY($1::text[]) ORDER BY 1",
        list(schemas),
    )
    found = {}
    for table in tables:
        rows = await conn.fetch(f"SELECT row_to_json(t)::text AS row FROM {table['name']} t")
        found[table["name"]] = sorted(row["row"] for row in rows)
    return found


def fresh_uuid() -> str:
    return str(uuid.uuid4())
