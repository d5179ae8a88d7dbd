"""Settings of the tool plane (environment variables prefixed NEMO_TOOLPLANE_)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from nemo_core.settings import ServiceSettings


class ToolPlaneSettings(ServiceSettings):
    """Tool plane settings."""

    model_config = SettingsConfigDict(env_prefix="NEMO_TOOLPLANE_", extra="ignore", frozen=True)

    listen_address: str = Field(
        "127.0.0.1:50053",
        description="host:port the gRPC server listens on (0.0.0.0:50053 in a container).",
    )
    mcp_host: str = Field(
        "127.0.0.1",
        description="Interface the MCP edge (HTTP) listens on (0.0.0.0 in a container).",
    )
    mcp_port: int = Field(8080, ge=0, le=65535, description="Port of the MCP edge; 0 picks one.")
    database_url: SecretStr = Field(
        description="postgresql:// URL connecting as the nemo_toolplane role; required.",
    )
    database_pool_size: int = Field(
        10, gt=0, description="Maximum PostgreSQL connections of this process."
    )
    context_address: str = Field("127.0.0.1:50051", description="host:port of the context service.")
    environment: Literal["development", "staging", "production"] = Field(
        "development",
        description="Environment the tool plane runs in; grants and policies match against it.",
    )
