"""Settings of the gateway (environment variables prefixed NEMO_GATEWAY_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from nemo_core.settings import ServiceSettings


class GatewaySettings(ServiceSettings):
    """Gateway settings."""

    model_config = SettingsConfigDict(env_prefix="NEMO_GATEWAY_", extra="ignore", frozen=True)

    listen_address: str = Field(
        "127.0.0.1:50052",
        description="host:port the gRPC server listens on (0.0.0.0:50052 in a container).",
    )
    context_address: str = Field("127.0.0.1:50051", description="host:port of the context service.")
