"""Snapshot PUTs signed with botocore's own SigV4 signer and sent over the client's kept-alive
HTTP session, without the rest of botocore's request pipeline (ADR 0016).

Every build writes one snapshot, and through the client a PutObject runs botocore's whole
pipeline each time: event hooks, parameter validation, endpoint-ruleset resolution, serialising,
then signing and sending. Only the last two depend on the object. So the bucket's endpoint and
signing scope are resolved once, by botocore itself: the client builds one PutObject and stops
before sending it (:func:`resolve_put_target`). Each snapshot is then one request to that URL
plus its key, signed by botocore's ``S3SigV4Auth`` with the session's credentials, which
refresh themselves as they do for the client, and sent through the client's own pooled HTTP
session, so proxies, TLS and timeouts are the client's and connections stay open between
objects. A bucket whose PutObject would not be signed with plain SigV4 keeps the client's
own ``put_object``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.exceptions import ClientError, NoCredentialsError

_PROBE_KEY: Final = "ai-context/endpoint-probe"
_PROBE_HANDLER_ID: Final = "nemo-snapshot-put-target"
_SIGV4: Final = "v4"
_ERROR_CODE: Final = re.compile(rb"<Code>([^<]{1,64})</Code>")


@dataclass(frozen=True)
class PutTarget:
    """Where the client would send a PutObject of the bucket, and how it would sign it."""

    bucket_url: str
    """The URL of an object is this and its key (snapshot keys need no escaping)."""
    region: str
    signing_name: str


async def resolve_put_target(client: Any, bucket: str) -> PutTarget | None:
    """The bucket's PutObject target, as botocore's endpoint ruleset resolves it for ``client``;
    ``None`` when it would not be signed with plain SigV4 (S3 Express, multi-region access
    points), whose objects then go through the client.

    The client builds a PutObject of a probe key and a hook takes its URL and signing scope
    before anything is signed or sent.
    """
    found: dict[str, Any] = {}

    def capture(params: dict[str, Any], context: dict[str, Any], **_: Any) -> Any:
        found.update(url=params["url"], signing=context.get("signing") or {})
        found["auth_type"] = context.get("auth_type")
        return AWSResponse(params["url"], 200, {}, None), {}

    event = "before-call.s3.PutObject"
    client.meta.events.register_first(event, capture, unique_id=_PROBE_HANDLER_ID)
    try:
        await client.put_object(Bucket=bucket, Key=_PROBE_KEY, Body=b"")
    finally:
        client.meta.events.unregister(event, unique_id=_PROBE_HANDLER_ID)
    url: str = found["url"]
    signing: dict[str, Any] = found["signing"]
    if found["auth_type"] != _SIGV4 or not url.endswith(_PROBE_KEY) or "region" not in signing:
        return None
    return PutTarget(
        bucket_url=url.removesuffix(_PROBE_KEY),
        region=signing["region"],
        signing_name=signing.get("signing_name", "s3"),
    )


class SignedPuts:
    """PUTs of objects to one :class:`PutTarget`."""

    def __init__(self, target: PutTarget, credentials: Any, http_session: Any) -> None:
        self._target = target
        self._credentials = credentials
        self._http = http_session

    async def put(self, key: str, body: bytes, content_type: str) -> None:
        """Store ``body`` under ``key``; raises ``ClientError`` for an S3 error answer, and what
        the HTTP session raises (botocore's connection errors) when there is none."""
        if self._credentials is None:
            raise NoCredentialsError()
        # Refreshed here when they are about to expire, as the client's signer does.
        credentials = await self._credentials.get_frozen_credentials()
        request = AWSRequest(
            method="PUT",
            url=self._target.bucket_url + key,
            data=body,
            headers={"Content-Type": content_type},
        )
        # Signs the payload's SHA-256 too, so S3 refuses a body changed on the way.
        S3SigV4Auth(credentials, self._target.signing_name, self._target.region).add_auth(request)
        response = await self._http.send(request.prepare())
        status: int = response.status_code
        if status >= 300:
            raise _client_error(status, await response.content)


def _client_error(status: int, answer: bytes) -> ClientError:
    """What the client raises for an S3 error answer: its code (e.g. ``AccessDenied``)."""
    match = _ERROR_CODE.search(answer)
    code = match.group(1).decode("ascii", "replace") if match else str(status)
    return ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject"
    )
