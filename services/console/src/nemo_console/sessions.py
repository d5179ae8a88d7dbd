"""Sessions in encrypted cookies: the console keeps no store, so every replica reads any session.

A session holds who signed in (as the tool plane verified them), their access token for the
people's API (what every call to a service carries), when it ends and the CSRF token of its
forms. The cookie is encrypted and authenticated (Fernet: AES-128-CBC with HMAC-SHA256), so a
browser can neither read the access token nor change who it names; it is HttpOnly, SameSite=Lax
and Secure outside development, and its contents carry their own end, checked on every request
(a copied cookie does not outlive the session).

Sign-in keeps its PKCE verifier, state and nonce in a second, short-lived cookie of the same
kind until the authorization server sends the person back.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from starlette.requests import Request
from starlette.responses import Response

SESSION_COOKIE = "nemo_console_session"
SIGNIN_COOKIE = "nemo_console_signin"
#: How long a sign-in may take at the authorization server.
SIGNIN_SECONDS = 600
#: Longest cookie value accepted; a session with a JWT fits well below it.
_MAX_COOKIE_CHARS = 4000


@dataclass(frozen=True)
class Session:
    """A signed-in person."""

    user_id: str
    #: The operator they are; "" when none.
    operator_id: str
    #: Their access token for the people's API.
    access_token: str
    #: Epoch seconds.
    expires_at: float
    csrf_token: str
    locale: str = "vi"

    @property
    def is_operator(self) -> bool:
        return bool(self.operator_id)


@dataclass(frozen=True)
class SignIn:
    """A sign-in on its way: what the callback checks and where the person was going."""

    state: str
    verifier: str
    nonce: str
    next_path: str


class Sealer:
    """Encrypts and decrypts cookie values with the session keys (the first encrypts)."""

    def __init__(self, keys: list[bytes]) -> None:
        self._fernet = MultiFernet([Fernet(key) for key in keys])

    @staticmethod
    def derive(configured: list[str]) -> list[bytes]:
        """Fernet keys from configured secrets of any printable form."""
        return [
            base64.urlsafe_b64encode(hashlib.sha256(key.encode()).digest()) for key in configured
        ]

    def seal(self, values: dict[str, Any]) -> str:
        return self._fernet.encrypt(json.dumps(values, separators=(",", ":")).encode()).decode()

    def open(self, sealed: str | None, max_age: int) -> dict[str, Any] | None:
        """The values, or None for a missing, altered, foreign or too old cookie."""
        if not sealed or len(sealed) > _MAX_COOKIE_CHARS:
            return None
        try:
            raw = self._fernet.decrypt(sealed.encode(), ttl=max_age)
            values = json.loads(raw)
        except (InvalidToken, ValueError):
            return None
        return values if isinstance(values, dict) else None


class Cookies:
    """Reads and writes the console's two cookies."""

    def __init__(self, sealer: Sealer, *, path: str, secure: bool, session_seconds: int) -> None:
        self._sealer = sealer
        self._path = path or "/"
        self._secure = secure
        self._session_seconds = session_seconds

    def session(self, request: Request) -> Session | None:
        """The request's live session; None when there is none or it ended."""
        values = self._sealer.open(request.cookies.get(SESSION_COOKIE), self._session_seconds)
        if values is None:
            return None
        try:
            session = Session(**values)
        except TypeError:
            return None
        return session if session.expires_at > time.time() else None

    def start(self, response: Response, session: Session) -> None:
        max_age = max(1, min(self._session_seconds, int(session.expires_at - time.time())))
        self._set(response, SESSION_COOKIE, self._sealer.seal(asdict(session)), max_age)

    def end(self, response: Response) -> None:
        response.delete_cookie(
            SESSION_COOKIE, path=self._path, secure=self._secure, httponly=True, samesite="lax"
        )

    def begin_sign_in(self, response: Response, sign_in: SignIn) -> None:
        self._set(response, SIGNIN_COOKIE, self._sealer.seal(asdict(sign_in)), SIGNIN_SECONDS)

    def sign_in(self, request: Request) -> SignIn | None:
        values = self._sealer.open(request.cookies.get(SIGNIN_COOKIE), SIGNIN_SECONDS)
        try:
            return SignIn(**values) if values is not None else None
        except TypeError:
            return None

    def end_sign_in(self, response: Response) -> None:
        response.delete_cookie(
            SIGNIN_COOKIE, path=self._path, secure=self._secure, httponly=True, samesite="lax"
        )

    def _set(self, response: Response, name: str, value: str, max_age: int) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path=self._path,
            secure=self._secure,
            httponly=True,
            samesite="lax",
        )


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def same_token(sent: str | None, expected: str) -> bool:
    """Whether a form's CSRF token is the session's (in constant time)."""
    if not sent:
        return False
    return secrets.compare_digest(sent.encode("utf-8"), expected.encode("utf-8"))
