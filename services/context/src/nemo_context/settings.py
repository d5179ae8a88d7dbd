"""Settings of the context service (environment variables prefixed NEMO_CONTEXT_)."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from nemo_core.settings import ServiceSettings


class ContextSettings(ServiceSettings):
    """Context service settings."""

    model_config = SettingsConfigDict(env_prefix="NEMO_CONTEXT_", extra="ignore", frozen=True)

    listen_address: str = Field(
        "127.0.0.1:50051",
        description="host:port the gRPC server listens on (0.0.0.0:50051 in a container).",
    )
    database_url: SecretStr = Field(
        description="postgresql:// URL connecting as the nemo_context role; required.",
    )
    database_pool_size: int = Field(
        10, gt=0, description="Maximum PostgreSQL connections of this process."
    )
