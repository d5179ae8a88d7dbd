"""Where snapshot objects live: a local directory (the embedded default) or an S3-compatible bucket.

Both backends store opaque bytes under snapshot keys (``ai-context/YYYY-MM-DD/<learner_ref>/
<uuid>.json``) and can drop every snapshot of a day, which is how retention purges. Keys are
checked against that shape before they touch a path or a bucket, so a key taken from a request can
never name anything else.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Sequence
from contextlib import AsyncExitStack
from datetime import date
from pathlib import Path
from typing import Any, Protocol

import aioboto3
from botocore.config import Config
from botocore.exceptions import ClientError

from nemo_context.coalescing import Coalescer, Outcomes

SNAPSHOT_PREFIX = "ai-context/"

#: Every snapshot key, and nothing else (refs of 24 hex digits, and of 12 from before they widened).
KEY_PATTERN = re.compile(
    r"^ai-context/(?P<day>\d{4}-\d{2}-\d{2})/nemo_(?:[0-9a-f]{24}|[0-9a-f]{12})/"
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.json\Z"
)
_DAY_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")

#: Id of the lifecycle rule this service owns in a snapshot bucket; other rules are kept.
LIFECYCLE_RULE_ID = "nemo-context-snapshot-retention"

# S3 accepts at most this many keys per DeleteObjects request.
_DELETE_BATCH = 1000


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

    async def aclose(self) -> None:
        await self._writes.aclose()


class S3Objects:
    """Snapshots as objects of one bucket of any S3-compatible service, through aioboto3.

    One client is opened on first use and kept until :meth:`aclose`. Credentials come from the
    session: by default the standard AWS chain (variables, shared files, instance roles).
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
        )
        self._exit_stack = AsyncExitStack()
        self._client: Any = None
        self._client_lock = asyncio.Lock()

    async def _s3(self) -> Any:
        async with self._client_lock:
            if self._client is None:
                self._client = await self._exit_stack.enter_async_context(
                    self._session.client(
                        "s3",
                        endpoint_url=self._endpoint_url,
                        region_name=self._region,
                        config=self._config,
                    )
                )
            return self._client

    async def put(self, key: str, body: bytes) -> None:
        s3 = await self._s3()
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
