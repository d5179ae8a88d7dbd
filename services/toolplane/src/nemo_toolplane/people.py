"""The person behind a call of the people's API, proven by their own credential.

Two credentials prove a person, both in the ``authorization`` metadata: an operator's own token
(:mod:`.operators`, issued by the owner with ``nemo operators issue-token``), and a person's
access token from the platform's authorization server for the people's API, which the console
passes on for whoever signed in (:class:`nemo_core.people.PersonVerifier`). The second proves a
platform account; that account is an operator when an active operator is linked to it. A caller
token proves a service, never a person: a call with nothing else acts for nobody.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from nemo_core.db import Pool
from nemo_core.oauth.claims import InvalidToken
from nemo_core.oauth.issuer import IssuerUnavailable
from nemo_core.people import PersonVerifier
from nemo_toolplane import operators
from nemo_toolplane.operators import OPERATOR_TOKEN_PREFIX, Operator

logger = logging.getLogger(__name__)


class PersonCredential(StrEnum):
    """What proved a person."""

    OPERATOR_TOKEN = "operator_token"  # noqa: S105  a kind of credential, not a token
    OAUTH = "oauth"


@dataclass(frozen=True)
class Person:
    """An authenticated person: their platform account, the operator they are (if any), and the
    credential that proved them."""

    user_id: str | None
    operator: Operator | None
    credential_kind: PersonCredential
    #: The operator token's id, or the access token's ``jti``.
    credential_id: str | None

    @property
    def name(self) -> str:
        """How records name the person: the operator id, else the platform account."""
        if self.operator is not None:
            return self.operator.operator_id
        return self.user_id or ""


class RefusalKind(StrEnum):
    MISSING = "missing"
    INVALID = "invalid"
    UNVERIFIABLE = "unverifiable"


class PersonRefused(Exception):
    """No person is proven; the message is safe to show the caller."""

    def __init__(self, kind: RefusalKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


_ASK = (
    'the people\'s API acts for a person: send their credential in the "authorization" '
    'metadata ("Bearer <operator token or access token>"); a caller token alone is no person'
)


class PeopleAuthenticator:
    """Credentials to people: operator tokens looked up, access tokens verified."""

    def __init__(self, pool: Pool, verifier: PersonVerifier | None) -> None:
        self._pool = pool
        self._verifier = verifier

    async def authenticate(self, credential: str | None) -> Person:
        """The person ``credential`` proves; :class:`PersonRefused` otherwise."""
        if not credential:
            raise PersonRefused(RefusalKind.MISSING, _ASK)
        if credential.startswith(OPERATOR_TOKEN_PREFIX):
            operator = await operators.authenticate(self._pool, credential)
            if operator is None:
                raise PersonRefused(
                    RefusalKind.INVALID, "the operator credential is unknown, revoked or expired"
                )
            return Person(
                operator.user_id, operator, PersonCredential.OPERATOR_TOKEN, operator.token_id
            )
        verifier = self._verifier
        if verifier is None or not verifier.accepts(credential):
            raise PersonRefused(RefusalKind.INVALID, "the credential is no person's")
        try:
            token = await verifier.verify(credential)
        except InvalidToken as invalid:
            raise PersonRefused(RefusalKind.INVALID, invalid.message) from None
        except IssuerUnavailable as unavailable:
            logger.warning(
                "a person's access token cannot be verified now",
                extra={"problem": str(unavailable)},
            )
            raise PersonRefused(
                RefusalKind.UNVERIFIABLE, "the access token cannot be verified now; retry later"
            ) from None
        linked = await operators.operator_of_user(self._pool, token.user_id)
        operator = None
        if linked is not None:
            operator = Operator(
                operator_id=linked[0], user_id=linked[1], token_id=f"oauth:{token.token_id or ''}"
            )
        return Person(token.user_id, operator, PersonCredential.OAUTH, token.token_id)
