"""Where snapshot objects live: a local directory (the embedded default) or an S3-compatible bucket.

Both backends store opaque bytes under snapshot keys (``ai-context/YYYY-MM-DD/<learner_ref>/
<uuid>.json``) and can drop every snapshot of a day, which is how retention purges. Keys are
checked against that shape before they touch a path or a bucket, so a key taken from a request can
never name anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import Collection, Sequence
from contextlib import AsyncExitStack
from datetime import date
from pathlib import Path
from typing import Any, Protocol

import aioboto3
from botocore.config import Config
from botocore.exceptions import ClientError

from nemo_context.coalescing import Coalescer, Outcomes
from nemo_context.snapshots.s3_puts import SignedPuts, resolve_put_target

SNAPSHOT_PREFIX = "ai-context/"

#: Every snapshot key, and nothing else (refs of 24 hex digits, and of 12 from before they widened).
KEY_PATTERN = re.compile(
    r"^ai-context/(?P<day>\d{4}-\d{2}-\d{2})/nemo_(?:[0-9a-f]{24}|[0-9a-f]{12})/"
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.json\Z"
)
_DAY_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")

LEDGER_PREFIX = "rights-ledger/"
#: Entries of the erasure ledger: one per request, named by the request id.
LEDGER_KEY_PATTERN = re.compile(r"^rights-ledger/[A-Za-z0-9][A-Za-z0-9._:-]{2,63}\.json\Z")
#: The start of a learner's snapshot directory name: ``nemo_`` and 12 hex digits, which both
#: widths of ref begin with.
REF_PREFIX_PATTERN = re.compile(r"^nemo_[0-9a-f]{12}\Z")

#: Id of the lifecycle rule this service owns in a snapshot bucket; other rules are kept.
LIFECYCLE_RULE_ID = "nemo-context-snapshot-retention"

# S3 accepts at most this many keys per DeleteObjects request.
_DELETE_BATCH = 1000

# Connections kept open to the bucket: as many as builds may write at once (botocore's default
# of 10 would make concurrent snapshots queue for one).
_POOL_CONNECTIONS = 64


def retention_rule(days: int) -> dict[str, Any]:
    """This service's lifecycle rule: snapshots expire ``days`` days after they were written;
    on a versioned bucket, replaced versions a day later; unfinished uploads after a day."""
    return {
        "ID": LIFECYCLE_RULE_ID,
        "Filter": {"Prefix": SNAPSHOT_PREFIX},
        "Status": "Enabled",
        "Expiration": {"Days": days},
        "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
    }


class ObjectNotFoundError(LookupError):
    """No object is stored under the key."""


def check_key(key: str) -> str:
    """Return ``key`` when it has the shape of a snapshot key, else raise ``ValueError``."""
    if not KEY_PATTERN.match(key):
        raise ValueError("not a snapshot key")
    return key


def ledger_key(request_id: str) -> str:
    """The ledger entry of a request; ``ValueError`` for an id that cannot name one."""
    key = f"{LEDGER_PREFIX}{request_id}.json"
    if not LEDGER_KEY_PATTERN.match(key):
        raise ValueError("not a request id")
    return key


def _ref_prefix(refs: Collection[str]) -> str:
    """The start all ``refs`` share, which lists their directories (and maybe others')."""
    prefixes = {ref[: len("nemo_") + 12] for ref in refs}
    if len(prefixes) != 1 or not REF_PREFIX_PATTERN.match(next(iter(prefixes))):
        raise ValueError("refs of one learner share their first 12 hex digits")
    return prefixes.pop()


def _under(key: str, refs: Collection[str]) -> bool:
    """Whether ``key`` is a snapshot key in the directory of one of ``refs`` exactly."""
    match = KEY_PATTERN.match(key)
    return match is not None and key.split("/")[2] in refs


def _parse_day(text: str) -> date | None:
    if not _DAY_PATTERN.match(text):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


class SnapshotObjects(Protocol):
    """Bytes stored under snapshot keys."""

    async def put(self, key: str, body: bytes) -> None:
        """Store ``body`` under ``key``, replacing nothing that readers could see half-written."""

    async def get(self, key: str) -> bytes:
        """The bytes under ``key``; :class:`ObjectNotFoundError` when there are none."""

    async def days(self) -> list[date]:
        """The days that hold snapshots, oldest first."""

    async def delete_day(self, day: date) -> int:
        """Delete every snapshot of ``day``; returns how many objects were deleted."""

    async def learner_keys(self, refs: Collection[str]) -> list[str]:
        """Keys of every stored version of the snapshots under ``refs`` (the refs of one
        learner, which share their first 12 hex digits), one entry per version."""

    async def delete_learner(self, refs: Collection[str]) -> int:
        """Delete every version of every snapshot under ``refs``; returns how many versions
        were deleted."""

    async def put_ledger(self, request_id: str, body: bytes) -> None:
        """Store the erasure ledger entry of ``request_id``, replacing an earlier one."""

    async def ledger(self) -> dict[str, bytes]:
        """Every ledger entry, by request id."""

    async def delete_ledger(self, request_id: str) -> None:
        """Delete the ledger entry of ``request_id`` (every version)."""

    async def aclose(self) -> None:
        """Release connections."""


class LocalDirectoryObjects:
    """Snapshots as files under a directory, readable only by the service's user."""

    def __init__(self, root: Path) -> None:
        self._root = root
        # Concurrent writes share one hop to a worker thread (see ``coalescing``).
        self._writes: Coalescer[tuple[Path, bytes]] = Coalescer(self._write_batch)

    def _path(self, key: str) -> Path:
        return self._root / check_key(key)

    async def put(self, key: str, body: bytes) -> None:
        await self._writes.submit((self._path(key), body))

    async def _write_batch(self, files: list[tuple[Path, bytes]]) -> Outcomes:
        return await asyncio.to_thread(self._write_files, files)

    def _write_files(self, files: list[tuple[Path, bytes]]) -> Outcomes:
        outcomes: list[BaseException | None] = []
        for path, body in files:
            try:
                self._write(path, body)
            except Exception as error:
                outcomes.append(error)
            else:
                outcomes.append(None)
        return outcomes

    def _write(self, path: Path, body: bytes) -> None:
        # Written beside the target and renamed, so a reader never sees a partial file. The
        # target's name is a fresh uuid, so the temporary name built from it is unique too.
        temporary = path.with_name(f".tmp-{path.name}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            fd = os.open(temporary, flags, 0o600)
        except FileNotFoundError:
            # The first snapshot of this day and pseudonym. The root is private, so the
            # directories below it need not be.
            self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(temporary, flags, 0o600)
        try:
            try:
                written = 0
                while written < len(body):
                    written += os.write(fd, body[written:])
            finally:
                os.close(fd)
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    async def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise ObjectNotFoundError(key) from None

    async def days(self) -> list[date]:
        return await asyncio.to_thread(self._days)

    def _days(self) -> list[date]:
        prefix_dir = self._root / SNAPSHOT_PREFIX
        if not prefix_dir.is_dir():
            return []
        found = (_parse_day(entry.name) for entry in prefix_dir.iterdir() if entry.is_dir())
        return sorted(day for day in found if day is not None)

    async def delete_day(self, day: date) -> int:
        return await asyncio.to_thread(self._delete_day, day)

    def _delete_day(self, day: date) -> int:
        day_dir = self._root / SNAPSHOT_PREFIX / day.isoformat()
        if not day_dir.is_dir():
            return 0
        count = sum(
            1
            for path in day_dir.rglob("*.json")
            if KEY_PATTERN.match(path.relative_to(self._root).as_posix())
        )
        shutil.rmtree(day_dir)
        return count

    def _learner_paths(self, refs: Collection[str]) -> list[Path]:
        pattern = f"{SNAPSHOT_PREFIX}*/{_ref_prefix(refs)}*/*.json"
        return [
            path
            for path in sorted(self._root.glob(pattern))
            if _under(path.relative_to(self._root).as_posix(), refs)
        ]

    async def learner_keys(self, refs: Collection[str]) -> list[str]:
        paths = await asyncio.to_thread(self._learner_paths, refs)
        return [path.relative_to(self._root).as_posix() for path in paths]

    async def delete_learner(self, refs: Collection[str]) -> int:
        return await asyncio.to_thread(self._delete_learner, refs)

    def _delete_learner(self, refs: Collection[str]) -> int:
        paths = self._learner_paths(refs)
        for path in paths:
            path.unlink(missing_ok=True)
        for directory in {path.parent for path in paths}:
            with contextlib.suppress(OSError):  # not empty: a snapshot written meanwhile
                directory.rmdir()
        return len(paths)

    async def put_ledger(self, request_id: str, body: bytes) -> None:
        path = self._root / ledger_key(request_id)
        await asyncio.to_thread(self._write_ledger, path, body)

    def _write_ledger(self, path: Path, body: bytes) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_name(f".tmp-{path.name}")
        temporary.write_bytes(body)
        temporary.chmod(0o600)
        os.replace(temporary, path)

    async def ledger(self) -> dict[str, bytes]:
        return await asyncio.to_thread(self._ledger)

    def _ledger(self) -> dict[str, bytes]:
        directory = self._root / LEDGER_PREFIX
        if not directory.is_dir():
            return {}
        return {
            path.name.removesuffix(".json"): path.read_bytes()
            for path in sorted(directory.glob("*.json"))
            if LEDGER_KEY_PATTERN.match(path.relative_to(self._root).as_posix())
        }

    async def delete_ledger(self, request_id: str) -> None:
        path = self._root / ledger_key(request_id)
        await asyncio.to_thread(path.unlink, missing_ok=True)

    async def aclose(self) -> None:
        await self._writes.aclose()


class S3Objects:
    """Snapshots as objects of one bucket of any S3-compatible service, through aioboto3.

    One client is opened on first use and kept until :meth:`aclose`, with its connections.
    Credentials come from the session: by default the standard AWS chain (variables, shared
    files, instance roles). Snapshots, one per build, skip the client's request pipeline: they
    are signed and sent by :class:`SignedPuts` over the client's HTTP session (ADR 0016).
    """

    def __init__(
        self,
        bucket: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        timeout_seconds: float = 5.0,
        session: aioboto3.Session | None = None,
    ) -> None:
        self.bucket = bucket
        self._endpoint_url = endpoint_url
        self._region = region
        self._session = session or aioboto3.Session()
        # One attempt and short socket timeouts: the caller's own timeout bounds the whole
        # write, and a retry loop inside it would only hide an unreachable endpoint.
        self._config = Config(
            connect_timeout=timeout_seconds,
            read_timeout=timeout_seconds,
            retries={"max_attempts": 1, "mode": "standard"},
            max_pool_connections=_POOL_CONNECTIONS,
        )
        self._exit_stack = AsyncExitStack()
        self._client: Any = None
        self._puts: SignedPuts | None = None
        self._client_lock = asyncio.Lock()

    async def _s3(self) -> Any:
        if self._client is not None:
            return self._client
        async with self._client_lock:
            if self._client is None:
                client = await self._exit_stack.enter_async_context(
                    self._session.client(
                        "s3",
                        endpoint_url=self._endpoint_url,
                        region_name=self._region,
                        config=self._config,
                    )
                )
                try:
                    target = await resolve_put_target(client, self.bucket)
                    if target is not None:
                        self._puts = SignedPuts(
                            target,
                            await self._session.get_credentials(),
                            # The client's own pool: its proxies, TLS settings and timeouts.
                            client._endpoint.http_session,
                        )
                finally:
                    # Kept when the target cannot be resolved: its own put then says why.
                    self._client = client
            return self._client

    async def put(self, key: str, body: bytes) -> None:
        s3 = await self._s3()
        if self._puts is not None:
            await self._puts.put(check_key(key), body, "application/json")
            return
        await s3.put_object(
            Bucket=self.bucket, Key=check_key(key), Body=body, ContentType="application/json"
        )

    async def get(self, key: str) -> bytes:
        s3 = await self._s3()
        try:
            response = await s3.get_object(Bucket=self.bucket, Key=check_key(key))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise ObjectNotFoundError(key) from None
            raise
        async with response["Body"] as stream:
            body: bytes = await stream.read()
        return body

    async def days(self) -> list[date]:
        s3 = await self._s3()
        found: set[date] = set()
        paginator = s3.get_paginator("list_objects_v2")
        async for page in paginator.paginate(
            Bucket=self.bucket, Prefix=SNAPSHOT_PREFIX, Delimiter="/"
        ):
            for common in page.get("CommonPrefixes", []):
                day = _parse_day(common["Prefix"][len(SNAPSHOT_PREFIX) :].rstrip("/"))
                if day is not None:
                    found.add(day)
        return sorted(found)

    async def delete_day(self, day: date) -> int:
        # Every version and delete marker goes: on a versioned bucket, deleting only the current
        # object would leave the child's data in a noncurrent version.
        s3 = await self._s3()
        paginator = s3.get_paginator("list_object_versions")
        versions: list[dict[str, str]] = []
        objects: set[str] = set()
        async for page in paginator.paginate(
            Bucket=self.bucket, Prefix=f"{SNAPSHOT_PREFIX}{day.isoformat()}/"
        ):
            for item in (*page.get("Versions", []), *page.get("DeleteMarkers", [])):
                versions.append({"Key": item["Key"], "VersionId": item["VersionId"]})
            objects.update(item["Key"] for item in page.get("Versions", []) if item["IsLatest"])
        for start in range(0, len(versions), _DELETE_BATCH):
            await self._delete_batch(s3, versions[start : start + _DELETE_BATCH])
        return len(objects)

    async def _versions(self, s3: Any, prefix: str) -> list[dict[str, str]]:
        """Every version and delete marker under ``prefix``."""
        found: list[dict[str, str]] = []
        paginator = s3.get_paginator("list_object_versions")
        async for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for item in (*page.get("Versions", []), *page.get("DeleteMarkers", [])):
                found.append({"Key": item["Key"], "VersionId": item["VersionId"]})
        return found

    async def _version_days(self, s3: Any) -> list[str]:
        """Every day directory holding any version (current or not) of a snapshot."""
        days: set[str] = set()
        paginator = s3.get_paginator("list_object_versions")
        async for page in paginator.paginate(
            Bucket=self.bucket, Prefix=SNAPSHOT_PREFIX, Delimiter="/"
        ):
            days.update(common["Prefix"] for common in page.get("CommonPrefixes", []))
        return sorted(days)

    async def _learner_versions(self, refs: Collection[str]) -> list[dict[str, str]]:
        ref_prefix = _ref_prefix(refs)
        s3 = await self._s3()
        found: list[dict[str, str]] = []
        for day in await self._version_days(s3):
            versions = await self._versions(s3, f"{day}{ref_prefix}")
            found.extend(version for version in versions if _under(version["Key"], refs))
        return found

    async def learner_keys(self, refs: Collection[str]) -> list[str]:
        return [version["Key"] for version in await self._learner_versions(refs)]

    async def delete_learner(self, refs: Collection[str]) -> int:
        versions = await self._learner_versions(refs)
        s3 = await self._s3()
        for start in range(0, len(versions), _DELETE_BATCH):
            await self._delete_batch(s3, versions[start : start + _DELETE_BATCH])
        return len(versions)

    async def put_ledger(self, request_id: str, body: bytes) -> None:
        s3 = await self._s3()
        await s3.put_object(
            Bucket=self.bucket,
            Key=ledger_key(request_id),
            Body=body,
            ContentType="application/json",
        )

    async def ledger(self) -> dict[str, bytes]:
        s3 = await self._s3()
        entries: dict[str, bytes] = {}
        paginator = s3.get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=self.bucket, Prefix=LEDGER_PREFIX):
            for item in page.get("Contents", []):
                if not LEDGER_KEY_PATTERN.match(item["Key"]):
                    continue
                response = await s3.get_object(Bucket=self.bucket, Key=item["Key"])
                async with response["Body"] as stream:
                    body: bytes = await stream.read()
                entries[item["Key"][len(LEDGER_PREFIX) : -len(".json")]] = body
        return entries

    async def delete_ledger(self, request_id: str) -> None:
        s3 = await self._s3()
        versions = await self._versions(s3, ledger_key(request_id))
        if versions:
            await self._delete_batch(s3, versions)

    async def _delete_batch(self, s3: Any, versions: Sequence[dict[str, str]]) -> None:
        response = await s3.delete_objects(
            Bucket=self.bucket, Delete={"Objects": list(versions), "Quiet": True}
        )
        errors = response.get("Errors", [])
        if errors:
            raise OSError(f"S3 refused to delete {len(errors)} snapshot object versions")

    async def apply_retention_rule(self, days: int) -> None:
        """Make the bucket expire snapshots ``days`` days after they were written, with the rule
        of ``deploy/s3/snapshot-lifecycle.json`` (:func:`retention_rule`).

        Other lifecycle rules of the bucket are kept; this service's rule is replaced.
        """
        s3 = await self._s3()
        try:
            current = await s3.get_bucket_lifecycle_configuration(Bucket=self.bucket)
            rules = [rule for rule in current["Rules"] if rule.get("ID") != LIFECYCLE_RULE_ID]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "NoSuchLifecycleConfiguration":
                raise
            rules = []
        rules.append(retention_rule(days))
        await s3.put_bucket_lifecycle_configuration(
            Bucket=self.bucket, LifecycleConfiguration={"Rules": rules}
        )

    async def aclose(self) -> None:
        await self._exit_stack.aclose()
        self._client = None
        self._puts = None
