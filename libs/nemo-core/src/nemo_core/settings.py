"""Common settings of every Nemo gRPC service.

Each service subclasses :class:`ServiceSettings` with its own environment prefix, for example::

    class ContextSettings(ServiceSettings):
        model_config = SettingsConfigDict(env_prefix="NEMO_CONTEXT_")
        listen_address: str = Field("127.0.0.1:50051", description=...)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, TypeAdapter, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_CALLER_TOKEN_METADATA_KEY = "x-nemo-caller-token"

IDENTITY_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,62}\Z")
MIN_TOKEN_LENGTH = 16

_METADATA_KEY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*\Z")
_LISTEN_ADDRESS_PATTERN = re.compile(r"^(\[[0-9a-fA-F:]+\]|[^:\s\[\]]+):(\d{1,5})\Z")
_TOKEN_MAP = TypeAdapter(dict[str, SecretStr])


def _read_secret(path: Path) -> str:
    # Kubernetes secret mounts often end with a newline that is not part of the secret.
    return path.read_text(encoding="utf-8").strip()


class ServiceSettings(BaseSettings):
    """Server settings shared by every service; subclasses set ``env_prefix``."""

    model_config = SettingsConfigDict(env_prefix="NEMO_", extra="ignore", frozen=True)

    listen_address: str = Field(
        "127.0.0.1:0",
        description="host:port the gRPC server listens on; port 0 picks a free port "
        "(use 0.0.0.0:PORT or [::]:PORT in a container).",
    )
    grace_period_seconds: float = Field(
        10.0,
        ge=0,
        description="On SIGTERM/SIGINT, how long in-flight RPCs may run after the server "
        "stops accepting new ones before they are cancelled.",
    )
    drain_seconds: float = Field(
        0.0,
        ge=0,
        description="On SIGTERM/SIGINT, time between health turning NOT_SERVING and the "
        "server refusing new RPCs, so load balancers stop routing first. 0 for local runs; "
        "about 5 on Kubernetes, with drain + grace below terminationGracePeriodSeconds.",
    )
    max_concurrent_rpcs: int = Field(
        1000,
        gt=0,
        description="RPCs handled at once; further RPCs fail fast with RESOURCE_EXHAUSTED.",
    )
    max_receive_message_bytes: int = Field(
        4 * 1024 * 1024,
        gt=0,
        description="Largest message the service accepts, as server and as client.",
    )
    max_send_message_bytes: int = Field(
        4 * 1024 * 1024,
        gt=0,
        description="Largest message the service sends, as server and as client.",
    )
    keepalive_time_seconds: float = Field(
        30.0,
        gt=0,
        description="Interval of HTTP/2 keepalive pings on idle connections, server and "
        "client side; the server accepts client pings up to twice as often.",
    )
    keepalive_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="How long a keepalive ping may go unanswered before the connection is closed.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Minimum level of the JSON log lines written to stderr."
    )
    caller_tokens: dict[str, SecretStr] = Field(
        default_factory=dict,
        description='Accepted caller tokens as a JSON object {"<identity>": "<token>"}; '
        f"identities are lowercase names, tokens at least {MIN_TOKEN_LENGTH} characters. "
        "Not used when TLS is configured.",
    )
    caller_tokens_file: Path | None = Field(
        None,
        description="File holding the caller tokens JSON object (for mounted secrets); "
        "mutually exclusive with caller_tokens.",
    )
    caller_token_metadata_key: str = Field(
        DEFAULT_CALLER_TOKEN_METADATA_KEY,
        description="gRPC metadata key in which callers send their token.",
    )
    client_token: SecretStr | None = Field(
        None,
        description="Token this service sends when it calls other Nemo services.",
    )
    client_token_file: Path | None = Field(
        None,
        description="File holding client_token (for mounted secrets); mutually exclusive "
        "with client_token.",
    )
    tls_cert_file: Path | None = Field(
        None,
        description="PEM certificate chain of this service. Setting the three TLS files "
        "turns on mutual TLS for serving and for calls to other services; callers are then "
        "identified by the common name or a subject alternative name of their certificate.",
    )
    tls_key_file: Path | None = Field(None, description="PEM private key of tls_cert_file.")
    tls_ca_file: Path | None = Field(
        None,
        description="PEM bundle of the CA that signs the certificates of callers and of "
        "called services.",
    )

    @field_validator("listen_address")
    @classmethod
    def _check_listen_address(cls, value: str) -> str:
        match = _LISTEN_ADDRESS_PATTERN.match(value)
        if match is None or int(match.group(2)) > 65535:
            raise ValueError("expected host:port, for example 127.0.0.1:50051 or [::]:50051")
        return value

    @field_validator("caller_token_metadata_key")
    @classmethod
    def _check_metadata_key(cls, value: str) -> str:
        if not _METADATA_KEY_PATTERN.match(value) or value.endswith("-bin"):
            raise ValueError("expected a lowercase ASCII metadata key not ending in -bin")
        return value

    @model_validator(mode="after")
    def _resolve_secret_files(self) -> Self:
        # The model is frozen, so resolved values are written once here, before anyone reads.
        if self.caller_tokens_file is not None:
            if self.caller_tokens:
                raise ValueError("set caller_tokens or caller_tokens_file, not both")
            raw = json.loads(_read_secret(self.caller_tokens_file))
            object.__setattr__(self, "caller_tokens", _TOKEN_MAP.validate_python(raw))
        if self.client_token_file is not None:
            if self.client_token is not None:
                raise ValueError("set client_token or client_token_file, not both")
            token = SecretStr(_read_secret(self.client_token_file))
            object.__setattr__(self, "client_token", token)
        self._check_caller_tokens()
        tls_files = (self.tls_cert_file, self.tls_key_file, self.tls_ca_file)
        if any(tls_files) and not all(tls_files):
            raise ValueError("set all of tls_cert_file, tls_key_file and tls_ca_file, or none")
        return self

    def _check_caller_tokens(self) -> None:
        seen: set[str] = set()
        for identity, token in self.caller_tokens.items():
            if not IDENTITY_PATTERN.match(identity):
                raise ValueError(f"caller identity {identity!r} is not a lowercase name")
            secret = token.get_secret_value()
            if len(secret) < MIN_TOKEN_LENGTH:
                raise ValueError(
                    f"token of caller {identity!r} is shorter than {MIN_TOKEN_LENGTH} characters"
                )
            if secret in seen:
                raise ValueError("two caller identities share one token")
            seen.add(secret)

    def tls_files(self) -> tuple[Path, Path, Path] | None:
        """(certificate chain, private key, CA bundle) when mutual TLS is configured."""
        if self.tls_cert_file and self.tls_key_file and self.tls_ca_file:
            return self.tls_cert_file, self.tls_key_file, self.tls_ca_file
        return None
