"""A real S3 API on loopback: the moto server in its own process, and a keep-alive front for it
(:mod:`nemo_testing.s3_front`) in another."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path

import aioboto3

from nemo_testing.ports import free_port, wait_for_port

# moto accepts any credentials; these only satisfy the SDKs' signing.
ACCESS_KEY_ID = "testing"
SECRET_ACCESS_KEY = "testing"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Endpoint:
    """Where the test S3 API listens and how to sign requests for it."""

    url: str
    access_key_id: str = ACCESS_KEY_ID
    secret_access_key: str = SECRET_ACCESS_KEY
    region: str = REGION

    def session(self) -> aioboto3.Session:
        """An aioboto3 session signing for this endpoint."""
        return aioboto3.Session(
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=self.region,
        )


@contextmanager
def moto_s3_server() -> Iterator[S3Endpoint]:
    """Run `moto_server` on a free loopback port for the duration of the block."""
    port = free_port()
    executable = Path(sys.executable).parent / "moto_server"
    process = subprocess.Popen(
        [str(executable), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
    )
    try:
        wait_for_port(port)
        yield S3Endpoint(url=f"http://127.0.0.1:{port}")
    finally:
        _stop(process)


@contextmanager
def keep_alive_s3_server(upstream: S3Endpoint) -> Iterator[S3Endpoint]:
    """``upstream`` behind a keep-alive front in a process of its own, for the duration of the
    block: clients keep their connections, as they do with S3 (moto closes every one)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nemo_testing.s3_front", upstream.url, str(port)],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield replace(upstream, url=f"http://127.0.0.1:{port}")
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def create_bucket(endpoint: S3Endpoint, bucket: str) -> None:
    """Create ``bucket`` on ``endpoint``; nothing when it exists already."""
    async with endpoint.session().client("s3", endpoint_url=endpoint.url) as client:
        with suppress(client.exceptions.BucketAlreadyOwnedByYou):
            await client.create_bucket(Bucket=bucket)


def context_snapshot_environment(endpoint: S3Endpoint, bucket: str) -> dict[str, str]:
    """The environment that sends a context service's snapshots to ``bucket`` of ``endpoint``."""
    return {
        "NEMO_CONTEXT_SNAPSHOT_BACKEND": "s3",
        "NEMO_CONTEXT_SNAPSHOT_S3_BUCKET": bucket,
        "NEMO_CONTEXT_SNAPSHOT_S3_ENDPOINT_URL": endpoint.url,
        "NEMO_CONTEXT_SNAPSHOT_S3_REGION": endpoint.region,
        "AWS_ACCESS_KEY_ID": endpoint.access_key_id,
        "AWS_SECRET_ACCESS_KEY": endpoint.secret_access_key,
    }
