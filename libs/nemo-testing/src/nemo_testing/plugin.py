"""pytest fixtures registered for the whole suite by the root conftest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nemo_testing.s3 import S3Endpoint, moto_s3_server


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """A real S3 API (moto server) on loopback, shared by the test session."""
    with moto_s3_server() as endpoint:
        yield endpoint
