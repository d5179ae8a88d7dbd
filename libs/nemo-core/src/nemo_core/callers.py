"""Who is calling (token or mTLS peer) and which RPCs each caller may use.

A service declares its ACL as one readable table::

    ACL = CallerAcl({
        "gateway": {"BuildContext", "BuildConversationContext", "RecordTurn"},
        "toolplane": {"BuildContext", "CheckLearnerAccess"},
    })

Keys are caller identities; values are short method names (``BuildContext``) or full names
(``/nemo.context.v1.ContextService/BuildContext``). A method nobody lists is denied to everyone.
Handlers read the caller with :func:`current_caller` for finer rules (purposes, scopes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from contextvars import ContextVar

import grpc
import grpc.aio
from pydantic import SecretStr

from nemo_core.errors import ServiceError, shared_error
from nemo_core.settings import IDENTITY_PATTERN
from nemo_protos.type.v1.error_reason_pb2 import ErrorReason

_caller: ContextVar[str] = ContextVar("nemo_caller")

# grpc's auth context keys for the peer certificate, most specific first.
_PEER_NAME_PROPERTIES = ("x509_common_name", "x509_subject_alternative_name")


def current_caller() -> str:
    """Identity of the caller of the RPC being handled; fails outside an authenticated RPC."""
    try:
        return _caller.get()
    except LookupError:
        raise RuntimeError("no authenticated caller in this context") from None


def set_current_caller(identity: str) -> None:
    """Bind the caller for the rest of the current RPC task (done by the server interceptor)."""
    _caller.set(identity)


def unauthenticated() -> ServiceError:
    """Error for a missing or unknown caller identity."""
    return shared_error(
        grpc.StatusCode.UNAUTHENTICATED,
        ErrorReason.CALLER_UNAUTHENTICATED,
        "the caller could not be identified",
    )


def not_allowed(identity: str, method: str) -> ServiceError:
    """Error for a known caller that the ACL does not let use ``method``."""
    return shared_error(
        grpc.StatusCode.PERMISSION_DENIED,
        ErrorReason.CALLER_NOT_ALLOWED,
        "the caller may not use this method",
        {"caller": identity, "method": method},
    )


class CallerAcl:
    """Which caller identity may call which method of a service."""

    def __init__(self, table: Mapping[str, Collection[str]]) -> None:
        for identity, methods in table.items():
            if not IDENTITY_PATTERN.match(identity):
                raise ValueError(f"caller identity {identity!r} is not a lowercase name")
            if isinstance(methods, str):
                raise TypeError(f"methods of {identity!r} must be a collection, not a string")
        self._table = {identity: frozenset(methods) for identity, methods in table.items()}

    @property
    def identities(self) -> frozenset[str]:
        """Every identity the table names."""
        return frozenset(self._table)

    def callers_of(self, full_method: str) -> frozenset[str]:
        """Identities allowed to call ``/package.Service/Method``."""
        short = full_method.rsplit("/", 1)[-1]
        return frozenset(
            identity
            for identity, methods in self._table.items()
            if full_method in methods or short in methods
        )

    def names(self) -> frozenset[str]:
        """Every method name the table mentions, as written."""
        return frozenset().union(*self._table.values())


class CallerIdentifier:
    """Resolve the caller of an RPC from its token, or from its certificate when TLS is on."""

    def __init__(
        self,
        *,
        tokens: Iterable[tuple[str, SecretStr]],
        metadata_key: str,
        tls: bool,
        known_identities: Iterable[str],
    ) -> None:
        """``tokens`` are (identity, token) pairs; an identity may have several during a
        rotation."""
        # Looking up a digest keeps the comparison independent of how much of a guess matches.
        self._by_digest = {
            hashlib.sha256(token.get_secret_value().encode()).digest(): identity
            for identity, token in tokens
        }
        self._metadata_key = metadata_key
        self._tls = tls
        self._known = frozenset(known_identities) | frozenset(self._by_digest.values())

    def identify(self, context: grpc.aio.ServicerContext[object, object]) -> str | None:
        """The caller's identity, or None when it is missing or unknown."""
        if self._tls:
            return self._from_peer(context.auth_context())
        for key, value in context.invocation_metadata() or ():
            if key == self._metadata_key:
                raw = value.encode() if isinstance(value, str) else value
                return self._by_digest.get(hashlib.sha256(raw).digest())
        return None

    def _from_peer(self, auth: Mapping[str, Iterable[bytes]]) -> str | None:
        for prop in _PEER_NAME_PROPERTIES:
            for name in auth.get(prop, ()):
                identity = name.decode(errors="replace")
                if identity in self._known:
                    return identity
        return None
