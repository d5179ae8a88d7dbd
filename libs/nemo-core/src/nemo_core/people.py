"""People, as the services see them: a person's access token for the people's API, verified by
the service that receives it, and the one way to tell whether two ids name the same person.

The console signs people in at the platform's authorization server and passes each person's
access token on in the ``authorization`` metadata, next to its own caller token. The token is
for the people's API (its ``aud`` is :attr:`PeopleSettings.people_audience`, never the MCP
edge's URL, so an agent's token is no person's), and the receiving service verifies it with
the same code the edge verifies agents' tokens with (:mod:`nemo_core.oauth`): nothing a caller
merely asserts names a person.

Ids of people are compared canonically (:func:`canonical_id`): ``U-2041-S1``, ``u-2041-s1``,
``U_2041_S1,`` and the same id in full-width letters are one person to a rule about who may
decide what. Folding more than the platform does errs on the side of refusing.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Self

import httpx
from pydantic import BaseModel, Field, model_validator

from nemo_core.oauth.claims import AccessToken, InvalidToken
from nemo_core.oauth.config import OAuthConfig
from nemo_core.oauth.issuer import Issuer
from nemo_core.oauth.signed import looks_like_jwt, verify_jwt
from nemo_core.text import fold_lookalikes

__all__ = ["PeopleSettings", "PersonVerifier", "canonical_id", "same_person"]


def canonical_id(value: str | None) -> str:
    """``value`` folded to what identifies a person: look-alike characters, width and case
    folded, then only ASCII letters and digits kept; "" for nothing."""
    if not value:
        return ""
    return "".join(char for char in fold_lookalikes(value) if char.isascii() and char.isalnum())


def same_person(one: str | None, other: str | None) -> bool:
    """Whether two ids name the same person canonically; never for an empty id."""
    first = canonical_id(one)
    return bool(first) and first == canonical_id(other)


class PeopleSettings(BaseModel):
    """Where people's access tokens come from: mixed into the settings of each service that
    acts for people (the tool plane, the context service)."""

    people_issuer: str | None = Field(
        None,
        description="Issuer URL of the OpenID provider people sign in to the console with; "
        "their access tokens prove who acts (unset: no person can be proven by an access token).",
    )
    people_audience: str | None = Field(
        None,
        description="The people's API as access tokens name it in aud, for example "
        "https://console.example.org/api; required with people_issuer. A token for the MCP edge "
        "is no person's.",
    )
    people_user_claim: str = Field(
        "sub",
        description="Claim of a person's access token holding their platform user id.",
    )
    people_clients: list[str] = Field(
        default_factory=list,
        description="OAuth client ids (JSON list) whose access tokens prove a person: the "
        "console's; required with people_issuer. A token another client obtained (an MCP host "
        "a parent signed in to) proves nobody here.",
    )

    @model_validator(mode="after")
    def _check_people(self) -> Self:
        if (self.people_issuer is None) != (self.people_audience is None):
            raise ValueError("people_issuer and people_audience are set together, or neither")
        if self.people_issuer is not None and not self.people_clients:
            raise ValueError("people_issuer needs people_clients: the console's client id")
        self.people_config()  # the URLs, checked once at start
        return self

    def people_config(self) -> OAuthConfig | None:
        """The verification settings of people's access tokens; None when unset."""
        if self.people_issuer is None or self.people_audience is None:
            return None
        return OAuthConfig(
            issuer=self.people_issuer,
            resource=self.people_audience,
            scopes=(),
            user_claim=self.people_user_claim,
        )


@dataclass(frozen=True)
class PersonToken:
    """A verified access token of a person: who, through which client, until when."""

    user_id: str
    client_id: str
    #: The token's ``jti``; None when it carries none.
    token_id: str | None
    #: Epoch seconds.
    expires_at: float


class PersonVerifier:
    """Verifies people's access tokens (JWTs) against one issuer, the people's audience and the
    clients allowed to obtain them."""

    def __init__(
        self, config: OAuthConfig, clients: Collection[str], http: httpx.AsyncClient
    ) -> None:
        self.config = config
        self._clients = frozenset(clients)
        self._issuer = Issuer(config, http)

    @staticmethod
    def accepts(token: str) -> bool:
        """Whether ``token`` has the shape of an access token this verifier reads."""
        return looks_like_jwt(token)

    async def verify(self, token: str) -> PersonToken:
        """The person ``token`` proves; ``InvalidToken`` when it is not a valid token for the
        people's API, ``IssuerUnavailable`` when the issuer's keys cannot be had."""
        verified: AccessToken = await verify_jwt(token, self._issuer, self.config)
        if verified.client_id not in self._clients:
            raise InvalidToken(
                "the token was issued to a client that may not act for people here",
                verified.facts,
            )
        return PersonToken(
            user_id=verified.user_id,
            client_id=verified.client_id,
            token_id=verified.jti,
            expires_at=verified.expires_at,
        )
