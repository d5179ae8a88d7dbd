"""Settings of the console (environment variables prefixed NEMO_CONSOLE_).

The console is no gRPC server, but it calls the three services as one: the shared settings
give its caller token (``client_token``), mutual TLS and the channels' limits; its own say where
it is published, how people sign in and where the services are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from nemo_core.client import channel_target
from nemo_core.secret_files import SECRET_FILE
from nemo_core.settings import ServiceSettings

#: Shortest session key accepted outside development.
MIN_SESSION_KEY_LENGTH = 32


class ConsoleSettings(ServiceSettings):
    """Console settings."""

    model_config = SettingsConfigDict(env_prefix="NEMO_CONSOLE_", extra="ignore", frozen=True)

    listen_address: str = Field(
        "127.0.0.1:50056",
        description="host:port the console's HTTP server listens on (0.0.0.0:8000 in a container).",
    )
    public_url: str = Field(
        "http://127.0.0.1:50056",
        description="The console's address as browsers reach it, with its path when it is "
        "published under one (https://example.org/console): every URL the console emits starts "
        "with it, and people come back to it from sign-in.",
    )
    environment: Literal["development", "staging", "production"] = Field(
        "development",
        description="Where the console runs. Outside development its cookies are Secure "
        "(HTTPS only) and it refuses to start without a session key and its sign-in settings.",
    )
    session_keys: Annotated[SecretStr | None, SECRET_FILE] = Field(
        None,
        description="Keys encrypting the session cookie (comma-separated, at least 32 "
        "characters each; the first encrypts, all decrypt, for rotation). Unset in development: "
        "a random key per process (sessions end on restart).",
    )
    session_seconds: int = Field(
        8 * 3600,
        gt=0,
        description="Longest a session lasts; it also ends when the person's access token "
        "expires, and people sign in again.",
    )
    oidc_issuer: str | None = Field(
        None,
        description="Issuer URL of the platform's OpenID provider, where people sign in "
        "(authorization code with PKCE).",
    )
    oidc_client_id: str = Field(
        "nemo-console", description="The console's client id at the OpenID provider."
    )
    oidc_client_secret: Annotated[SecretStr | None, SECRET_FILE] = Field(
        None, description="The console's client secret (a confidential client)."
    )
    people_audience: str | None = Field(
        None,
        description="The people's API as the services name it (their NEMO_*_PEOPLE_AUDIENCE): "
        "the resource the console asks access tokens for.",
    )
    toolplane_address: str = Field(
        "127.0.0.1:50053", description="host:port of the tool plane's gRPC server."
    )
    context_address: str = Field(
        "127.0.0.1:50051", description="host:port of the context service's gRPC server."
    )
    gateway_address: str = Field(
        "127.0.0.1:50052", description="host:port of the gateway's gRPC server."
    )
    call_timeout_seconds: float = Field(
        10.0, gt=0, description="Deadline of each call the console makes to a service."
    )
    eval_dir: Path = Field(
        Path(".nemo/eval"),
        description="Directory of the `make eval` reports (<label>.json and <label>.png); the "
        "console shows the latest.",
    )

    @field_validator("toolplane_address", "context_address", "gateway_address")
    @classmethod
    def _check_address(cls, value: str) -> str:
        channel_target(value)
        return value

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise ValueError("public_url must be an absolute http(s) URL without a query")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _check_production(self) -> Self:
        if self.environment == "development":
            return self
        if self.session_keys is None or not self.session_key_list():
            raise ValueError("session_keys is required outside development")
        missing = [
            name
            for name in ("oidc_issuer", "oidc_client_secret", "people_audience")
            if getattr(self, name) is None
        ]
        if missing:
            raise ValueError(f"{', '.join(missing)} required outside development")
        if urlsplit(self.public_url).scheme != "https":
            raise ValueError("public_url must be https outside development")
        return self

    def session_key_list(self) -> list[str]:
        """The session keys, each at least :data:`MIN_SESSION_KEY_LENGTH` characters."""
        if self.session_keys is None:
            return []
        keys = [key.strip() for key in self.session_keys.get_secret_value().split(",")]
        if any(len(key) < MIN_SESSION_KEY_LENGTH for key in keys):
            raise ValueError(
                f"each session key must be at least {MIN_SESSION_KEY_LENGTH} characters"
            )
        return keys

    @property
    def root_path(self) -> str:
        """The path the console is published under ("" at the root)."""
        return urlsplit(self.public_url).path.rstrip("/")

    @property
    def secure_cookies(self) -> bool:
        return self.environment != "development"
