"""Common settings of every Nemo gRPC service.

Each service subclasses :class:`ServiceSettings` with its own environment prefix, for example::

    class ContextSettings(ServiceSettings):
        model_config = SettingsConfigDict(env_prefix="NEMO_CONTEXT_")
        listen_address: str = Field("127.0.0.1:50051", description=...)

Secrets are marked ``SECRET_FILE`` and may also come from the file a ``*_FILE`` variable names
(``nemo_core.secret_files``). A service reads its settings with :func:`load_settings`, which
reports bad values without showing them. Validators must never put a value into their messages:
it may be a secret.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Annotated, Literal, Self, TypeVar, cast

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from nemo_core.secret_files import SECRET_FILE, SecretFileSource

logger = logging.getLogger(__name__)

DEFAULT_CALLER_TOKEN_METADATA_KEY = "x-nemo-caller-token"  # noqa: S105  a header name, not a token

IDENTITY_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,62}\Z")
MIN_TOKEN_LENGTH = 16

_METADATA_KEY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*\Z")
_LISTEN_ADDRESS_PATTERN = re.compile(r"^(\[[0-9a-fA-F:]+\]|[^:\s\[\]]+):(\d{1,5})\Z")

#: Exit status of a service whose settings are invalid.
EXIT_INVALID_SETTINGS = 2


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
        description="Calls of the service's own methods handled at once; one more fails fast "
        "with RESOURCE_EXHAUSTED (SERVER_BUSY). Health checks and reflection are not counted and "
        "always answered.",
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
    max_connection_age_seconds: float = Field(
        300.0,
        gt=0,
        description="Age (with 10% jitter) after which the server asks a client to reconnect "
        "(HTTP/2 GOAWAY), so connections spread over new replicas; calls in flight finish on "
        "the old connection (max_connection_age_grace_seconds).",
    )
    max_connection_age_grace_seconds: float = Field(
        600.0,
        gt=0,
        description="How long calls in flight may still run on a connection past its age. The "
        "connection closes as soon as they end, so this only bounds a call that never does; "
        "keep it above the longest call the service serves (a model answer on a slow server "
        "takes far longer than the shutdown grace).",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Minimum level of the JSON log lines written to stderr."
    )
    caller_tokens: Annotated[dict[str, SecretStr], SECRET_FILE] = Field(
        default_factory=dict,
        description='Accepted caller tokens as a JSON object {"<identity>": "<token>"}; '
        f"identities are lowercase names, tokens at least {MIN_TOKEN_LENGTH} characters. "
        "Not used when TLS is configured.",
    )
    previous_caller_tokens: Annotated[dict[str, SecretStr], SECRET_FILE] = Field(
        default_factory=dict,
        description="Tokens still accepted while callers move to new ones (rotation), in the "
        "shape of caller_tokens; remove them once every caller sends its new token.",
    )
    caller_token_metadata_key: str = Field(
        DEFAULT_CALLER_TOKEN_METADATA_KEY,
        description="gRPC metadata key in which callers send their token.",
    )
    client_token: Annotated[SecretStr | None, SECRET_FILE] = Field(
        None,
        description="Token this service sends when it calls other Nemo services.",
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

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The default sources, with the secrets of ``*_FILE`` variables after the
        environment (a secret and its file are never both set)."""
        secret_files = SecretFileSource(
            settings_cls,
            cast(InitSettingsSource, init_settings),
            cast(EnvSettingsSource, env_settings),
        )
        return init_settings, env_settings, secret_files, dotenv_settings, file_secret_settings

    @model_validator(mode="after")
    def _check_tokens_and_tls(self) -> Self:
        self._check_caller_tokens()
        tls_files = (self.tls_cert_file, self.tls_key_file, self.tls_ca_file)
        if any(tls_files) and not all(tls_files):
            raise ValueError("set all of tls_cert_file, tls_key_file and tls_ca_file, or none")
        return self

    def accepted_caller_tokens(self) -> list[tuple[str, SecretStr]]:
        """Every (identity, token) a caller may authenticate with: the current tokens, then
        the previous ones of a rotation in progress."""
        return [*self.caller_tokens.items(), *self.previous_caller_tokens.items()]

    def _check_caller_tokens(self) -> None:
        seen: set[str] = set()
        for identity, token in self.accepted_caller_tokens():
            if not IDENTITY_PATTERN.match(identity):
                # Not named: a token pasted where its identity belongs would be shown.
                raise ValueError(
                    "a caller identity is not a lowercase name (a letter, then letters, digits, "
                    "- or _)"
                )
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


_Settings = TypeVar("_Settings", bound=BaseSettings)


def load_settings(settings_class: type[_Settings]) -> _Settings:
    """Read ``settings_class`` from the environment, or log what is wrong and exit with
    :data:`EXIT_INVALID_SETTINGS`.

    Only the variable and the problem are logged: pydantic's own report quotes the input,
    which holds secrets (tokens, the password in a database URL).
    """
    try:
        return settings_class()
    except ValidationError as error:
        problems = [_describe(settings_class, error_item) for error_item in error.errors()]
    except SettingsError as error:
        problems = [str(error)]  # names the variable whose JSON does not parse, not its value
    except OSError as error:
        problems = [f"cannot read {error.filename}: {error.strerror}"]  # a secret file
    logger.error("invalid settings", extra={"problems": problems})
    raise SystemExit(EXIT_INVALID_SETTINGS)


def _describe(settings_class: type[BaseSettings], error: ErrorDetails) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    location = error["loc"]
    if not location:
        return message  # a check across settings; its message names them
    # Only the field: deeper parts of a location can be dictionary keys taken from the input.
    prefix = settings_class.model_config.get("env_prefix", "")
    return f"{prefix}{location[0]}".upper() + f": {message}"
