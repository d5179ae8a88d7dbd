"""A real S3 API on loopback: the moto server in its own process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
