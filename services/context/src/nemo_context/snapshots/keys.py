"""Per-learner snapshot keys: destroying one makes every copy of that learner's snapshots
unreadable, the bucket's old versions and every backup included.

Each learner has one random 256-bit data key. A snapshot is sealed with AES-GCM under it
(:func:`seal`), its object key as associated data, so a sealed object moved under another key
does not open. The data key is stored wrapped in ``learning.snapshot_keys``: AES-GCM under a key
derived from the master key (a mounted secret, like the pseudonym key), bound to the row's id.

Rows are keyed by the learner's *subject*, an HMAC of the learner id under a second key derived
from the same master key: the key table, the rights tables and the erasure ledger name a learner
by it and never by id, so they keep no trace of an erased child. Subjects do not change when the
pseudonym key is rotated, so a key found by subject covers snapshots written under every ref.

Unwrapped keys are cached for a short time (every build seals one snapshot); an erasure deletes
the row, and :meth:`DataKeys.forget` drops a cached copy at once where the process hears of it.
The database refuses a key to a blocked learner (migration 0026): a build under way when its
learner was erased cannot create the key again.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import asyncpg
from cachetools import TTLCache
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from nemo_core.db import Connection, Pool

_DATA_KEY_BYTES: Final = 32
_NONCE_BYTES: Final = 12
_FORMAT: Final = b"\x01"
"""First byte of a sealed snapshot: the format (AES-256-GCM, 96-bit nonce, 128-bit tag)."""

_WRAP_LABEL: Final = b"nemo snapshot key wrapping v1"
_SUBJECT_LABEL: Final = b"nemo learner subject v1"
_REF_LABEL: Final = b"nemo snapshot ref v1\x00"

#: Width of the pseudonym a ref digest is computed over: the refs of 12 hex digits (from before
#: refs widened) are prefixes of today's 24, so one digest covers both widths.
REF_DIGEST_WIDTH: Final = len("nemo_") + 12


class SnapshotSealError(Exception):
    """A sealed snapshot does not open: altered, truncated, or sealed under another key or ref."""


class SnapshotKeyRefusedError(Exception):
    """The learner is restricted or erased: no snapshot key is created or read for it."""


class MasterKey:
    """The master secret and the two keys derived from it (wrapping, subjects)."""

    __slots__ = ("_subject_key", "_wrapping")

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise ValueError("the snapshot master key must hold at least 32 bytes")
        self._wrapping = AESGCM(hmac.new(secret, _WRAP_LABEL, hashlib.sha256).digest())
        self._subject_key = hmac.new(secret, _SUBJECT_LABEL, hashlib.sha256).digest()

    @classmethod
    def ephemeral(cls) -> MasterKey:
        """A random master key for this process only (development without a configured key)."""
        return cls(secrets.token_bytes(32))

    def subject(self, learner_id: str) -> str:
        """The learner's subject: 64 hex digits naming the learner without its id."""
        return hmac.new(self._subject_key, learner_id.encode("utf-8"), hashlib.sha256).hexdigest()

    def ref_digest(self, learner_ref: str) -> str:
        """Keyed digest of a snapshot ref (either width gives the same digest)."""
        ref = learner_ref[:REF_DIGEST_WIDTH].encode("ascii")
        return hmac.new(self._subject_key, _REF_LABEL + ref, hashlib.sha256).hexdigest()

    def wrap(self, key_id: uuid.UUID, data_key: bytes) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._wrapping.encrypt(nonce, data_key, key_id.bytes)

    def unwrap(self, key_id: uuid.UUID, wrapped: bytes) -> bytes:
        try:
            return self._wrapping.decrypt(
                wrapped[:_NONCE_BYTES], wrapped[_NONCE_BYTES:], key_id.bytes
            )
        except InvalidTag:
            raise SnapshotSealError("the data key was wrapped under another master key") from None


def seal(data_key: bytes, input_ref: str, plaintext: bytes) -> bytes:
    """The stored form of a snapshot: format byte, nonce, AES-GCM ciphertext and tag."""
    nonce = os.urandom(_NONCE_BYTES)
    return _FORMAT + nonce + AESGCM(data_key).encrypt(nonce, plaintext, input_ref.encode("ascii"))


def unseal(data_key: bytes, input_ref: str, sealed: bytes) -> bytes:
    """The snapshot's canonical JSON; :class:`SnapshotSealError` when it does not open."""
    if sealed[:1] != _FORMAT or len(sealed) < 1 + _NONCE_BYTES + 16:
        raise SnapshotSealError("not a sealed snapshot")
    nonce, body = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
    try:
        return AESGCM(data_key).decrypt(nonce, body, input_ref.encode("ascii"))
    except InvalidTag:
        raise SnapshotSealError("the sealed snapshot does not open under its key") from None


@dataclass(frozen=True)
class DataKey:
    """A learner's unwrapped data key and the id snapshots record it by."""

    key_id: uuid.UUID
    key: bytes


# Creates the learner's key unless a concurrent build did; either way returns the stored row.
_GET_OR_CREATE: Final = """
WITH created AS (
    INSERT INTO learning.snapshot_keys (subject, id, wrapped) VALUES ($1, $2, $3)
    ON CONFLICT (subject) DO NOTHING
    RETURNING id, wrapped
)
SELECT id, wrapped FROM created
UNION ALL
SELECT id, wrapped FROM learning.snapshot_keys WHERE subject = $1
LIMIT 1
"""


class DataKeys:
    """Learners' data keys: read from ``learning.snapshot_keys``, created on first use, cached."""

    def __init__(
        self,
        pool: Pool,
        master: MasterKey,
        *,
        cache_seconds: float = 60.0,
        max_entries: int = 10_000,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.master = master
        self._pool = pool
        self._by_subject: TTLCache[str, DataKey] = TTLCache(max_entries, cache_seconds, timer)
        self._by_id: TTLCache[uuid.UUID, bytes] = TTLCache(max_entries, cache_seconds, timer)

    async def for_learner(self, learner_id: str) -> DataKey:
        """The learner's data key, created when it has none yet."""
        subject = self.master.subject(learner_id)
        cached = self._by_subject.get(subject)
        if cached is not None:
            return cached
        async with self._pool.acquire() as conn:
            found = await _get_or_create(conn, self.master, subject)
        self._by_subject[subject] = found
        self._by_id[found.key_id] = found.key
        return found

    async def by_id(self, key_id: uuid.UUID) -> bytes | None:
        """The data key recorded as ``key_id``; None once it has been destroyed."""
        cached = self._by_id.get(key_id)
        if cached is not None:
            return cached
        async with self._pool.acquire() as conn:
            wrapped = await conn.fetchval(
                "SELECT wrapped FROM learning.snapshot_keys WHERE id = $1", key_id
            )
        if wrapped is None:
            return None
        key = self.master.unwrap(key_id, bytes(wrapped))
        self._by_id[key_id] = key
        return key

    def forget(self, subject: str) -> None:
        """Drop the cached key of ``subject`` (its row was destroyed)."""
        found = self._by_subject.pop(subject, None)
        if found is not None:
            self._by_id.pop(found.key_id, None)


async def _get_or_create(conn: Connection, master: MasterKey, subject: str) -> DataKey:
    for _attempt in range(2):
        key_id = uuid.uuid4()
        data_key = secrets.token_bytes(_DATA_KEY_BYTES)
        try:
            row = await conn.fetchrow(
                _GET_OR_CREATE, subject, key_id, master.wrap(key_id, data_key)
            )
        except asyncpg.ObjectNotInPrerequisiteStateError:
            raise SnapshotKeyRefusedError("the learner is blocked") from None
        # No row: a concurrent transaction created the key after this statement's snapshot.
        if row is not None:
            stored_id: uuid.UUID = row["id"]
            return DataKey(stored_id, master.unwrap(stored_id, bytes(row["wrapped"])))
    raise LookupError("the learner's snapshot key could not be created or read")
