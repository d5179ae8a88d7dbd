"""Snapshots: a durable record of exactly what a bundle showed a model or an agent.

A snapshot is the canonical JSON of the returned bundle (sorted keys, no whitespace, UTF-8, proto
field names), stored under ``ai-context/YYYY-MM-DD/<learner_ref>/<uuid>.json`` (the key is the
bundle's ``input_ref``; the path names the pseudonym, never the learner). Its SHA-256 is recorded
in PostgreSQL, apart from the object, so reading a snapshot back detects an object altered after
it was written.

Writing a snapshot never blocks or fails the build that asked for it: :func:`persist_snapshot`
gives up after the configured timeout, logs the failure without learner data, counts it on
``nemo.context.snapshot.failures`` and returns ``None``, and the caller returns the bundle with an
empty ``input_ref``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Final, Protocol, TypeVar

import asyncpg
from google.protobuf.message import Message
from opentelemetry import metrics

from nemo_context.gate import Gated
from nemo_context.proto_json import message_to_json_object
from nemo_context.settings import ContextSettings
from nemo_context.snapshots.digests import DigestRecorder, DigestRow
from nemo_context.snapshots.keys import DataKeys, MasterKey, SnapshotSealError, seal, unseal
from nemo_context.snapshots.objects import (
    SNAPSHOT_PREFIX,
    LocalDirectoryObjects,
    ObjectNotFoundError,
    S3Objects,
    SnapshotObjects,
    check_key,
)
from nemo_core.db import Pool
from nemo_core.deadlines import downstream_timeout
from nemo_core.errors import ServiceError
from nemo_protos.context.v1.conversation_pb2 import ConversationBundle
from nemo_protos.context.v1.learner_context_pb2 import ContextBundle

__all__ = [
    "CONTEXT_KIND",
    "CONVERSATION_KIND",
    "SNAPSHOT_KINDS",
    "SnapshotDigestMismatchError",
    "SnapshotNotFoundError",
    "SnapshotOwner",
    "SnapshotStore",
    "StoredSnapshot",
    "VerifiedSnapshot",
    "canonical_json",
    "create_snapshot_objects",
    "create_snapshot_store",
    "master_key_from_settings",
    "persist_snapshot",
    "snapshot_key",
    "with_snapshot",
]

logger = logging.getLogger(__name__)

_failures = metrics.get_meter("nemo.context").create_counter(
    "nemo.context.snapshot.failures",
    unit="{failure}",
    description="Snapshot writes that failed or timed out; the bundle was returned without "
    "input_ref.",
)


CONTEXT_KIND: Final = "context"
CONVERSATION_KIND: Final = "conversation"
SNAPSHOT_KINDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        ContextBundle.DESCRIPTOR.full_name: CONTEXT_KIND,
        ConversationBundle.DESCRIPTOR.full_name: CONVERSATION_KIND,
    }
)
"""What each kind of snapshot holds (recorded with its digest): the bundle message type."""


def canonical_json(message: Message) -> bytes:
    """The one byte form of a message that is hashed and stored.

    Proto3 JSON with proto field names, fields at their default value omitted, keys sorted, no
    whitespace, non-ASCII text kept as UTF-8 (Vietnamese stays readable).
    """
    document = message_to_json_object(message)
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def snapshot_key(learner_ref: str, created_at: datetime, snapshot_id: uuid.UUID) -> str:
    """``ai-context/YYYY-MM-DD/<learner_ref>/<uuid>.json``, dated in UTC."""
    day = created_at.astimezone(UTC).date().isoformat()
    return check_key(f"{SNAPSHOT_PREFIX}{day}/{learner_ref}/{snapshot_id}.json")


@dataclass(frozen=True)
class SnapshotOwner:
    """The learner a snapshot is about: its id picks the data key, its ref names the object."""

    learner_id: str
    learner_ref: str


@dataclass(frozen=True)
class StoredSnapshot:
    """Where a snapshot was stored and the digest recorded for it."""

    input_ref: str
    sha256: str


@dataclass(frozen=True)
class VerifiedSnapshot:
    """A snapshot read back whose bytes match the recorded digest."""

    input_ref: str
    sha256: str
    canonical_json: bytes
    kind: str = CONTEXT_KIND
    """What the snapshot holds (see :data:`SNAPSHOT_KINDS`)."""


class SnapshotNotFoundError(LookupError):
    """No snapshot is recorded under the ref, or its object is gone (expired by retention)."""


class SnapshotDigestMismatchError(Exception):
    """The stored object no longer matches the digest recorded when it was written."""


class SnapshotStore(Protocol):
    """Stores snapshots and reads them back verified."""

    async def put(
        self, owner: SnapshotOwner, body: bytes, kind: str = CONTEXT_KIND
    ) -> StoredSnapshot:
        """Store ``body`` (a bundle of ``kind``) about ``owner`` and record its digest."""

    async def get(self, input_ref: str) -> VerifiedSnapshot:
        """Read a snapshot back, verified against its recorded digest."""

    async def aclose(self) -> None:
        """Release connections."""


class DigestedSnapshotStore:
    """Snapshot objects in a :class:`SnapshotObjects` backend, sealed under the learner's data
    key; digests in PostgreSQL.

    The digest is the SHA-256 of the canonical JSON, before sealing: the ``snapshot_sha256`` a
    bundle carries is what an auditor can recompute from what ``GetSnapshot`` returns. Reading
    opens the sealed object (AES-GCM authenticates it) and then compares the digest.
    """

    def __init__(
        self,
        objects: SnapshotObjects,
        pool: Pool,
        *,
        write_timeout_seconds: float,
        keys: DataKeys,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.objects = objects
        self.keys = keys
        self._pool = pool
        self._digests = DigestRecorder(pool)
        self._write_timeout = write_timeout_seconds
        self._clock = clock

    async def put(
        self, owner: SnapshotOwner, body: bytes, kind: str = CONTEXT_KIND
    ) -> StoredSnapshot:
        created_at = self._clock()
        stored = StoredSnapshot(
            input_ref=snapshot_key(owner.learner_ref, created_at, uuid.uuid4()),
            sha256=hashlib.sha256(body).hexdigest(),
        )
        async with asyncio.timeout(self._write_timeout):
            data_key = await self.keys.for_learner(owner.learner_id)
            # Object first: a digest row always points at an object that was fully written.
            await self.objects.put(stored.input_ref, seal(data_key.key, stored.input_ref, body))
            try:
                await self._digests.record(
                    DigestRow(
                        stored.input_ref,
                        owner.learner_ref,
                        stored.sha256,
                        len(body),
                        created_at,
                        kind,
                        data_key.key_id,
                    )
                )
            except asyncpg.ForeignKeyViolationError:
                # The key was destroyed (an erasure, or a purge of an unused key) while this
                # process held it. The object sealed under it can never be opened, and its key
                # names the learner's ref: it goes too, since the erasure may have listed the
                # learner's objects before it was written. The next snapshot reads the
                # learner's key again.
                self.keys.forget(self.keys.master.subject(owner.learner_id))
                await self.objects.delete(stored.input_ref)
                raise
        return stored

    async def get(self, input_ref: str) -> VerifiedSnapshot:
        check_key(input_ref)
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT sha256, kind, key_id FROM learning.context_snapshots WHERE input_ref = $1",
                input_ref,
            )
        if row is None:
            raise SnapshotNotFoundError(input_ref)
        recorded: str = row["sha256"]
        try:
            stored = await self.objects.get(input_ref)
        except ObjectNotFoundError:
            raise SnapshotNotFoundError(input_ref) from None
        body = await self._opened(input_ref, row["key_id"], stored)
        actual = hashlib.sha256(body).hexdigest()
        if not hmac.compare_digest(actual, recorded):
            raise SnapshotDigestMismatchError(input_ref)
        return VerifiedSnapshot(
            input_ref=input_ref, sha256=actual, canonical_json=body, kind=row["kind"]
        )

    async def _opened(self, input_ref: str, key_id: uuid.UUID | None, stored: bytes) -> bytes:
        """The canonical JSON of a stored object; written in the clear before keys existed."""
        if key_id is None:
            return stored
        data_key = await self.keys.by_id(key_id)
        if data_key is None:
            # Destroyed between the digest read and now: the learner was just erased.
            raise SnapshotNotFoundError(input_ref)
        try:
            return unseal(data_key, input_ref, stored)
        except SnapshotSealError:
            raise SnapshotDigestMismatchError(input_ref) from None

    async def aclose(self) -> None:
        await self._digests.aclose()
        await self.objects.aclose()


def create_snapshot_objects(settings: ContextSettings) -> SnapshotObjects:
    """The object backend the settings choose (local directory or S3)."""
    if settings.snapshot_backend == "s3":
        if settings.snapshot_s3_bucket is None:
            raise ValueError("snapshot_backend s3 needs snapshot_s3_bucket")
        return S3Objects(
            settings.snapshot_s3_bucket,
            endpoint_url=settings.snapshot_s3_endpoint_url,
            region=settings.snapshot_s3_region,
            timeout_seconds=settings.snapshot_write_timeout_seconds,
        )
    return LocalDirectoryObjects(settings.snapshot_dir)


def master_key_from_settings(settings: ContextSettings) -> MasterKey:
    """The configured snapshot master key; in development without one, a random key for this
    process (its snapshots cannot be read after a restart, and a warning says so)."""
    if settings.snapshot_master_key is not None:
        return MasterKey(settings.snapshot_master_key.get_secret_value().encode("utf-8"))
    logger.warning(
        "no snapshot master key configured: using a random key for this process, so its "
        "snapshots cannot be read after a restart (set NEMO_CONTEXT_SNAPSHOT_MASTER_KEY_FILE)"
    )
    return MasterKey.ephemeral()


def create_snapshot_store(
    settings: ContextSettings, pool: Pool, master: MasterKey | None = None
) -> DigestedSnapshotStore:
    """The snapshot store of a context server: its backend, its data keys (under ``master``, by
    default the configured one) and digests in ``pool``'s database."""
    return DigestedSnapshotStore(
        create_snapshot_objects(settings),
        pool,
        write_timeout_seconds=settings.snapshot_write_timeout_seconds,
        keys=DataKeys(pool, master or master_key_from_settings(settings)),
    )


# Kept back from the caller's deadline for returning the bundle after a snapshot attempt.
_REPLY_RESERVE_SECONDS = 0.1


def _time_left_for_snapshot() -> float | None:
    """Seconds the snapshot may take within the current RPC's deadline; None without one."""
    try:
        return downstream_timeout(margin=_REPLY_RESERVE_SECONDS)
    except ServiceError:
        return 0.0


async def persist_snapshot(
    store: SnapshotStore, owner: SnapshotOwner, bundle: Message
) -> StoredSnapshot | None:
    """Store the canonical JSON of ``bundle``; ``None`` when that failed. Never raises.

    ``bundle`` must be exactly what is returned, with ``input_ref`` and ``snapshot_sha256``
    still empty; the caller sets those two from the result.
    """
    try:
        # Never past the caller's deadline: a late snapshot must not cost the caller its bundle.
        async with asyncio.timeout(_time_left_for_snapshot()):
            return await store.put(
                owner, canonical_json(bundle), SNAPSHOT_KINDS[bundle.DESCRIPTOR.full_name]
            )
    except Exception as error:
        # The error's text may carry the key, which names the pseudonym: only its type is logged.
        reason = "timeout" if isinstance(error, TimeoutError) else "error"
        logger.warning(
            "snapshot write failed; bundle returned without input_ref",
            extra={"failure": reason, "error_type": type(error).__name__},
        )
        _failures.add(1, {"reason": reason})
        return None


_B = TypeVar("_B", ContextBundle, ConversationBundle)


async def with_snapshot(store: SnapshotStore, bundle: Gated[_B], learner_id: str) -> Gated[_B]:
    """``bundle`` with the ``input_ref`` and ``snapshot_sha256`` of its stored snapshot; as it
    is when the snapshot could not be written (see :func:`persist_snapshot`).

    The snapshot holds the gated bundle exactly as returned, minus those two fields, which name
    the snapshot itself.
    """
    returned = bundle.message
    stored = await persist_snapshot(
        store, SnapshotOwner(learner_id, returned.learner_ref), returned
    )
    if stored is None:
        return bundle
    return bundle.with_text(input_ref=stored.input_ref, snapshot_sha256=stored.sha256)
