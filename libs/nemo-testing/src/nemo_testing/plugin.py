"""pytest fixtures registered for the whole suite by the root conftest."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from nemo_devtools.oauth_server import Account
from nemo_testing.oauth import OAuthServer, running_authorization_server
from nemo_testing.s3 import S3Endpoint, moto_s3_server


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """A real S3 API (moto server) on loopback, shared by the test session."""
    with moto_s3_server() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
async def oauth_server(
    tmp_path_factory: pytest.TempPathFactory, oauth_accounts: list[Account]
) -> AsyncIterator[OAuthServer]:
    """The local authorization server (started on first use), shared by the test session; its
    accounts come from the ``oauth_accounts`` fixture, which the suite's conftest provides."""
    async with running_authorization_server(
        tmp_path_factory.mktemp("oauth") / "state", oauth_accounts
    ) as server:
        yield server
