"""Channels from one Nemo service to another.

A channel traces every call (W3C ``traceparent`` in the metadata), sends this service's caller
token, limits message sizes, keeps the connection alive, and retries a call only when it fails with
UNAVAILABLE. Pass ``timeout=downstream_timeout()`` on each call to propagate the deadline.

A channel balances calls over every address its target resolves to (``round_robin``): a list of
``host:port`` IP addresses (``10.0.0.7:50051,10.0.0.8:50051``), or a name whose DNS answer holds
every replica (``dns:///nemo-context-pods.nemo.svc:50051``, a headless Service). A call that
fails as UNAVAILABLE because its replica went away is retried on another one; a replica that is
down is skipped until it answers again.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import grpc.aio
from opentelemetry.instrumentation.grpc import aio_client_interceptors
from pydantic import SecretStr

from nemo_core.settings import ServiceSettings

RETRY_MAX_ATTEMPTS = 3

# waitForReady false: a call to an unreachable service fails fast (and is retried) instead of
# queueing until its deadline. Retry throttling stops retries when most calls fail, so retries
# at each hop of gateway -> context cannot multiply into a storm.
SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [{}],
                "waitForReady": False,
                "retryPolicy": {
                    "maxAttempts": RETRY_MAX_ATTEMPTS,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ],
        "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
        "loadBalancingConfig": [{"round_robin": {}}],
    }
)

# A gRPC target naming its resolver is taken as it is.
_SCHEME = re.compile(r"^(dns|ipv4|ipv6|unix|unix-abstract|vsock|xds):")


def channel_target(address: str) -> str:
    """The gRPC target of ``address``: ``host:port``, a gRPC target URI, or a comma-separated list
    of IP ``host:port`` addresses of one family (balanced over by ``round_robin``)."""
    if "," not in address or _SCHEME.match(address):
        return address
    hosts = [part.strip() for part in address.split(",")]
    families = set()
    for host in hosts:
        name, _, port = host.rpartition(":")
        try:
            families.add(ipaddress.ip_address(name.removeprefix("[").removesuffix("]")).version)
        except ValueError:
            raise ValueError(
                "a list of addresses must hold IP host:port entries; use a DNS name that "
                "resolves to every replica instead"
            ) from None
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError("every address of the list needs a port from 1 to 65535")
    if len(families) != 1:
        raise ValueError("a list of addresses must be all IPv4 or all IPv6")
    return f"ipv{families.pop()}:{','.join(hosts)}"


_Call = TypeVar("_Call")


class _CallerToken:
    """Adds the caller token to the metadata of each call."""

    def __init__(self, key: str, token: SecretStr) -> None:
        self._entry = (key, token.get_secret_value())

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()), self._entry)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    async def _call(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Awaitable[_Call]],
        details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> _Call:
        return await continuation(self._details(details), request)


# grpc sorts channel interceptors by the first interceptor kind each one is an instance of, so
# every kind of call needs its own object.
class _UnaryUnaryToken(_CallerToken, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await self._call(continuation, details, request)


class _UnaryStreamToken(_CallerToken, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await self._call(continuation, details, request)


class _StreamUnaryToken(_CallerToken, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await self._call(continuation, details, requests)


class _StreamStreamToken(_CallerToken, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await self._call(continuation, details, requests)


def _token_interceptors(key: str, token: SecretStr) -> list[grpc.aio.ClientInterceptor]:
    kinds = (_UnaryUnaryToken, _UnaryStreamToken, _StreamUnaryToken, _StreamStreamToken)
    return [kind(key, token) for kind in kinds]


def _channel_options(settings: ServiceSettings) -> list[tuple[str, Any]]:
    """Channel arguments: message limits, keepalive and the retry service config."""
    return [
        ("grpc.max_receive_message_length", settings.max_receive_message_bytes),
        ("grpc.max_send_message_length", settings.max_send_message_bytes),
        ("grpc.keepalive_time_ms", int(settings.keepalive_time_seconds * 1000)),
        ("grpc.keepalive_timeout_ms", int(settings.keepalive_timeout_seconds * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.enable_retries", 1),
        # After an outage, reconnect within seconds (grpc's default backoff grows to 120 s).
        ("grpc.max_reconnect_backoff_ms", 5000),
        ("grpc.service_config", SERVICE_CONFIG),
    ]


def create_channel(
    target: str, settings: ServiceSettings, *, token: SecretStr | None = None
) -> grpc.aio.Channel:
    """Open a channel to another Nemo service at ``target`` (see :func:`channel_target`).

    ``token`` defaults to ``settings.client_token``. When ``settings`` configures TLS, the channel
    uses mutual TLS with this service's certificate, and the target's host name must be in the
    server's certificate.
    """
    interceptors: list[grpc.aio.ClientInterceptor] = list(aio_client_interceptors())  # type: ignore[no-untyped-call]
    token = token if token is not None else settings.client_token
    if token is not None:
        interceptors += _token_interceptors(settings.caller_token_metadata_key, token)
    options = _channel_options(settings)
    target = channel_target(target)
    tls = settings.tls_files()
    if tls is None:
        return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)
    cert_file, key_file, ca_file = tls
    credentials = grpc.ssl_channel_credentials(
        root_certificates=ca_file.read_bytes(),
        private_key=key_file.read_bytes(),
        certificate_chain=cert_file.read_bytes(),
    )
    return grpc.aio.secure_channel(target, credentials, options=options, interceptors=interceptors)
