"""What a browser is told about every response, and what a state-changing request must carry.

Every response forbids framing (``frame-ancestors 'none'``), inline scripts and styles and any
script or style not served by the console itself (Content-Security-Policy), content sniffing and
referrers; pages are not cached, since they show a person's data. Every request that changes
something is a POST carrying the session's CSRF token in its form, from a page of the console
itself (``Origin``, when the browser sends it, must be the console's).
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)

HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    # same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with its own
    # form posts, and the origin check could no longer tell them from a foreign page's.
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
)
_NO_STORE = (b"cache-control", b"no-store")


class SecurityHeaders:
    """Adds :data:`HEADERS` to every response, and ``no-store`` to all but static files."""

    def __init__(self, app: ASGIApp, static_prefix: str) -> None:
        self._app = app
        self._static_prefix = static_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        static = str(scope.get("path", "")).startswith(self._static_prefix)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += HEADERS
                if not static:
                    headers.append(_NO_STORE)
                message["headers"] = headers
            await send(message)

        await self._app(scope, receive, with_headers)


def same_origin(origin: str | None, public_url: str, also: Iterable[str] = ()) -> bool:
    """Whether a request's ``Origin`` is the console's own (an absent one is left to the CSRF
    token, as older browsers send none on same-origin form posts)."""
    if origin is None:
        return True
    own = urlsplit(public_url)
    allowed = {f"{own.scheme}://{own.netloc}", *also}
    return origin in allowed
