"""Which browsers and host names the MCP edge answers: ``Origin`` and ``Host`` allow-lists
(DNS-rebinding protection), and CORS for the origins it accepts.

A page on another site that a browser lets reach the edge (directly, or by rebinding its own
name to a loopback address) sends its own ``Origin`` and ``Host``: a present ``Origin`` outside
the list is 403, as the MCP transport requires, and a ``Host`` outside a configured list is 421.
Both are refused before authentication, so such a page learns nothing about tokens, and each
refusal leaves one audit row (through the endpoint, :meth:`McpEndpoint.refuse_browser`), with
the refused value in a bounded form (:func:`kept_value`). An allowed origin gets CORS answers
(preflight included, which carries no token), so a browser-based client such as an inspector
can call the edge. Agents and SDKs send no ``Origin`` and are unaffected.

Patterns are exact (``https://console.nemo12.com``, ``mcp.nemo12.com``) or leave the port open
with ``:*`` (``http://localhost:*`` is ``http://localhost`` on any port or none). The SDK's
``TransportSecuritySettings`` does the same checks, but inside the session manager, after this
service's authentication, answering plain text, with no CORS.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger(__name__)

#: The local stack's own origins: any page served from this machine's loopback names.
LOOPBACK_ORIGINS = ("http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*")
#: The local stack's own host names, so a rebound name is refused.
LOOPBACK_HOSTS = ("localhost:*", "127.0.0.1:*", "[::1]:*")

_ANY_PORT = ":*"
_HOST = r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])"
_PORT = r"(?::(?P<port>\d{1,5}|\*))?"
_ORIGIN_PATTERN = re.compile(rf"https?://{_HOST}{_PORT}")
_HOST_PATTERN = re.compile(rf"{_HOST}{_PORT}")
#: Response headers a browser script may read: the request id, and why a request was refused.
EXPOSED_HEADERS = ("X-Request-Id", "WWW-Authenticate", "Retry-After")


#: Longest header value an audit row keeps as it came (a host name is at most 253 characters).
_MAX_KEPT = 270

#: Audits a request the guard refused: its ASGI scope, what was refused (a fixed label), and
#: the refused header in the form :func:`kept_value` gives it.
RefusalAudit = Callable[[Scope, str, Mapping[str, str]], Awaitable[None]]


class InvalidPattern(ValueError):
    """An allow-list entry that is not an origin (or host) pattern."""


def _checked(pattern: str, shape: re.Pattern[str], what: str) -> str:
    lowered = pattern.lower()
    match = shape.fullmatch(lowered)
    port = match.group("port") if match else None
    if match is None or (port is not None and port != "*" and int(port) > 65535):
        raise InvalidPattern(f"not {what} (port may be *): {pattern!r}")
    return lowered


def check_origin_pattern(pattern: str) -> str:
    """``pattern`` in lower case if it is ``http[s]://host[:port|:*]``; else
    :class:`InvalidPattern`."""
    return _checked(pattern, _ORIGIN_PATTERN, "an origin, scheme://host[:port]")


def check_host_pattern(pattern: str) -> str:
    """``pattern`` in lower case if it is ``host[:port|:*]``; else :class:`InvalidPattern`."""
    return _checked(pattern, _HOST_PATTERN, "a host, host[:port]")


def kept_value(value: str, shape: re.Pattern[str]) -> str:
    """A refused ``Origin`` or ``Host`` as an audit row keeps it: lower-cased when it has the
    shape of one (or is the ``null`` origin), else only a digest, since anything else may be
    arbitrary text a page chose."""
    lowered = value.lower()
    if len(lowered) <= _MAX_KEPT and (lowered == "null" or shape.fullmatch(lowered)):
        return lowered
    return "invalid:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _regex(patterns: Iterable[str]) -> str | None:
    alternatives = [
        re.escape(p.removesuffix(_ANY_PORT)) + r"(?::\d{1,5})?"
        if p.endswith(_ANY_PORT)
        else re.escape(p)
        for p in patterns
    ]
    return "|".join(f"(?:{a})" for a in alternatives) if alternatives else None


class OriginPolicy:
    """The allow-lists (patterns as :func:`check_origin_pattern` and :func:`check_host_pattern`
    accept them). No host patterns means any ``Host``: behind an ingress, it names the service."""

    def __init__(self, origins: Iterable[str] = (), hosts: Iterable[str] = ()) -> None:
        self.origin_regex = _regex(check_origin_pattern(p) for p in origins)
        self._origins = re.compile(self.origin_regex) if self.origin_regex else None
        host_regex = _regex(check_host_pattern(p) for p in hosts)
        self._hosts = re.compile(host_regex) if host_regex else None

    def origin_allowed(self, origin: str) -> bool:
        return self._origins is not None and self._origins.fullmatch(origin.lower()) is not None

    def host_allowed(self, host: str | None) -> bool:
        if self._hosts is None:
            return True
        return host is not None and self._hosts.fullmatch(host.lower()) is not None


def _refusal(status: int, message: str) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json")


class BrowserGuard:
    """ASGI middleware: refuses foreign origins (403) and host names (421), each audited by
    ``audit``, then answers CORS for allowed origins around ``app``."""

    def __init__(self, app: ASGIApp, policy: OriginPolicy, audit: RefusalAudit) -> None:
        self._policy = policy
        self._audit = audit
        regex = policy.origin_regex
        self._app = (
            app
            if regex is None
            else CORSMiddleware(
                app,
                allow_origin_regex=regex,
                allow_methods=["POST"],
                # The edge reads its own headers and the MCP routing ones, which include one per
                # annotated tool parameter (Mcp-Param-*): mirror what the browser asks for.
                allow_headers=["*"],
                expose_headers=EXPOSED_HEADERS,
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is not None and not self._policy.origin_allowed(origin):
            kept = {"origin": kept_value(origin, _ORIGIN_PATTERN)}
            logger.warning("mcp request refused: origin not allowed", extra=kept)
            await self._audit(scope, "origin not allowed", kept)
            await _refusal(403, "Origin not allowed")(scope, receive, send)
            return
        host = headers.get("host")
        if not self._policy.host_allowed(host):
            kept = {"host": kept_value(host, _HOST_PATTERN)} if host is not None else {}
            logger.warning("mcp request refused: host not allowed", extra=kept)
            await self._audit(scope, "host not allowed", kept)
            await _refusal(421, "Host not allowed")(scope, receive, send)
            return
        await self._app(scope, receive, send)
