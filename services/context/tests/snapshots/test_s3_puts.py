"""Snapshot PUTs signed by the service itself (ADR 0016): S3 accepts their signatures, expiring
credentials are refreshed, connections are kept, and S3's answers are the client's errors."""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import aioboto3
import httpx
import pytest
from aiobotocore.credentials import AioRefreshableCredentials
from aiobotocore.session import AioSession
from botocore.exceptions import ClientError, ParamValidationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_context.snapshots.objects import S3Objects
from nemo_context.snapshots.s3_puts import resolve_put_target
from nemo_context.snapshots.store import snapshot_key
from nemo_testing.s3 import S3Endpoint, create_bucket, moto_s3_server
from nemo_testing.s3_front import S3Front

BUCKET = "nemo-signed-snapshots"
USER = "nemo-context"


@dataclass(frozen=True)
class AccessKey:
    key_id: str
    secret: str


@dataclass(frozen=True)
class SigningS3:
    """An S3 API that checks every request's SigV4 signature against its IAM user's keys."""

    endpoint: S3Endpoint
    key: AccessKey
    """The user's lasting key (IAM allows two; the credential test makes the other)."""


@pytest.fixture(scope="module")
def signing_moto() -> Iterator[S3Endpoint]:
    with moto_s3_server() as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
async def signing_s3(signing_moto: S3Endpoint) -> SigningS3:
    """A moto server of its own whose user has an access key, with authentication switched on
    once it exists (from then on a request signed wrongly, or with a deleted key, is refused)."""
    endpoint = signing_moto
    async with endpoint.session().client("iam", endpoint_url=endpoint.url) as iam:
        await iam.create_user(UserName=USER)
        await iam.put_user_policy(
            UserName=USER,
            PolicyName="everything",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
                }
            ),
        )
        key = (await iam.create_access_key(UserName=USER))["AccessKey"]
    await create_bucket(endpoint, BUCKET)
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{endpoint.url}/moto-api/reset-auth", content=b"0")
        answer.raise_for_status()
    return SigningS3(endpoint, AccessKey(key["AccessKeyId"], key["SecretAccessKey"]))


def session_with(credentials: Any, region: str) -> aioboto3.Session:
    """A session whose credential chain yields ``credentials`` first."""

    class Given:
        METHOD = "test-given"

        async def load(self) -> Any:
            return credentials

    botocore_session = AioSession()
    botocore_session.get_component("credential_provider").insert_before("env", Given())
    return aioboto3.Session(botocore_session=botocore_session, region_name=region)


def keyed(s3: SigningS3, key: AccessKey) -> aioboto3.Session:
    return aioboto3.Session(
        aws_access_key_id=key.key_id,
        aws_secret_access_key=key.secret,
        region_name=s3.endpoint.region,
    )


def new_key(day: date | None = None) -> str:
    created = datetime.combine(day or date(2026, 12, 5), datetime.min.time(), UTC)
    return snapshot_key(f"nemo_{secrets.token_hex(12)}", created, uuid.uuid4())


@pytest.fixture
async def signed_objects(signing_s3: SigningS3) -> AsyncIterator[S3Objects]:
    objects = S3Objects(
        BUCKET, endpoint_url=signing_s3.endpoint.url, session=keyed(signing_s3, signing_s3.key)
    )
    yield objects
    await objects.aclose()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    day=st.dates(min_value=date(2020, 1, 1), max_value=date(2099, 12, 31)),
    body=st.binary(min_size=0, max_size=4096),
)
async def test_signed_puts_are_accepted_and_read_back_byte_for_byte(
    signed_objects: S3Objects, day: date, body: bytes
) -> None:
    key = new_key(day)
    await signed_objects.put(key, body)
    assert await signed_objects.get(key) == body


async def test_a_put_signed_with_the_wrong_secret_is_refused_with_the_clients_error(
    signing_s3: SigningS3,
) -> None:
    forged = AccessKey(signing_s3.key.key_id, signing_s3.key.secret[::-1])
    objects = S3Objects(
        BUCKET, endpoint_url=signing_s3.endpoint.url, session=keyed(signing_s3, forged)
    )
    try:
        with pytest.raises(ClientError) as refused:
            await objects.put(new_key(), b"{}")
    finally:
        await objects.aclose()
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


async def test_expiring_credentials_are_refreshed_before_a_put(signing_s3: SigningS3) -> None:
    # The first key is deleted once the credentials holding it have expired: a put still
    # signed with it would be refused.
    first = await _a_new_access_key(signing_s3)
    clock = [datetime.now(UTC)]
    refreshes: list[datetime] = []

    async def refresh() -> dict[str, Any]:
        refreshes.append(clock[0])
        return {
            "access_key": signing_s3.key.key_id,
            "secret_key": signing_s3.key.secret,
            "token": None,
            "expiry_time": (clock[0] + timedelta(hours=1)).isoformat(),
        }

    credentials = AioRefreshableCredentials(
        first.key_id,
        first.secret,
        None,
        clock[0] + timedelta(hours=1),
        refresh,
        "test-rotating",
        time_fetcher=lambda: clock[0],
    )
    objects = S3Objects(
        BUCKET,
        endpoint_url=signing_s3.endpoint.url,
        session=session_with(credentials, signing_s3.endpoint.region),
    )
    try:
        before = new_key()
        await objects.put(before, b'{"signed":"first"}')
        assert refreshes == []
        async with keyed(signing_s3, signing_s3.key).client(
            "iam", endpoint_url=signing_s3.endpoint.url
        ) as iam:
            await iam.delete_access_key(UserName=USER, AccessKeyId=first.key_id)
        clock[0] += timedelta(hours=2)

        after = new_key()
        await objects.put(after, b'{"signed":"second"}')
        assert refreshes == [clock[0]]
        assert await objects.get(before) == b'{"signed":"first"}'
        assert await objects.get(after) == b'{"signed":"second"}'
    finally:
        await objects.aclose()


async def _a_new_access_key(s3: SigningS3) -> AccessKey:
    async with keyed(s3, s3.key).client("iam", endpoint_url=s3.endpoint.url) as iam:
        created = (await iam.create_access_key(UserName=USER))["AccessKey"]
    return AccessKey(created["AccessKeyId"], created["SecretAccessKey"])


@pytest.fixture
async def front(s3_endpoint: S3Endpoint) -> AsyncIterator[S3Front]:
    async with S3Front(s3_endpoint.url) as running:
        yield running


async def test_puts_keep_their_connections_open(
    front: S3Front, s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    objects = S3Objects(
        s3_bucket, endpoint_url=front.url, session=replace(s3_endpoint, url=front.url).session()
    )
    try:
        keys = [new_key() for _ in range(12)]
        for key in keys[:4]:
            await objects.put(key, key.encode())
        assert len(front.connections) == 1
        # Concurrent puts open at most one connection each, and keep them for the next ones.
        await asyncio.gather(*(objects.put(key, key.encode()) for key in keys[4:8]))
        opened = len(front.connections)
        await asyncio.gather(*(objects.put(key, key.encode()) for key in keys[8:]))
        assert len(front.connections) == opened <= 4
        assert [await objects.get(key) for key in keys] == [key.encode() for key in keys]
    finally:
        await objects.aclose()


@pytest.mark.parametrize(("status", "code"), [(403, "AccessDenied"), (500, "InternalError")])
async def test_an_s3_error_answer_raises_the_clients_error(
    front: S3Front, s3_endpoint: S3Endpoint, s3_bucket: str, status: int, code: str
) -> None:
    objects = S3Objects(
        s3_bucket, endpoint_url=front.url, session=replace(s3_endpoint, url=front.url).session()
    )
    front.fail_with(status, code)
    try:
        with pytest.raises(ClientError) as refused:
            await objects.put(new_key(), b"{}")
    finally:
        await objects.aclose()
    assert refused.value.response["Error"]["Code"] == code
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == status


async def test_a_directory_bucket_keeps_the_clients_own_put() -> None:
    # S3 Express buckets are signed with session credentials of their own, not plain SigV4.
    session = aioboto3.Session(
        aws_access_key_id="unused", aws_secret_access_key="unused", region_name="us-east-1"
    )
    async with session.client("s3") as client:
        assert await resolve_put_target(client, "snapshots--use1-az4--x-s3") is None
        target = await resolve_put_target(client, "nemo-prod-context-snapshots")
    assert target is not None
    assert (target.region, target.signing_name) == ("us-east-1", "s3")


async def test_a_bucket_botocore_refuses_fails_every_put_with_botocores_error(
    s3_endpoint: S3Endpoint,
) -> None:
    objects = S3Objects("not/a bucket", endpoint_url=s3_endpoint.url, session=s3_endpoint.session())
    try:
        for _ in range(2):
            with pytest.raises(ParamValidationError):
                await objects.put(new_key(), b"{}")
    finally:
        await objects.aclose()
