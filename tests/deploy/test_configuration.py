"""The rendered configuration starts the real services: each Deployment's environment, with
its Secrets mounted as the kubelet would, is accepted by the service's settings class."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic_settings import BaseSettings

from nemo_console.settings import ConsoleSettings
from nemo_context.settings import ContextSettings
from nemo_core.secret_files import file_variable, secret_file_fields
from nemo_gateway.settings import GatewaySettings
from nemo_toolplane.settings import ToolPlaneSettings
from tests.deploy.deploy_manifests import (
    OVERLAYS,
    RENDERERS,
    SERVICES,
    decoded,
    load_create_secrets,
    materialize_environment,
    pod_spec,
    rendered,
    the,
)

SETTINGS: dict[str, type[BaseSettings]] = {
    "nemo-context": ContextSettings,
    "nemo-gateway": GatewaySettings,
    "nemo-toolplane": ToolPlaneSettings,
}

create_secrets = load_create_secrets()


def _secrets() -> dict[str, dict[str, str]]:
    manifests, _ = create_secrets.build_secrets(
        namespace="nemo",
        owner_database_url="postgresql://nemo_owner:pw@db.internal:5432/nemo",
        pseudonym_key="0123456789abcdef" * 4,
        identifier_key="i" * 32,
        snapshot_master_key="fedcba9876543210" * 4,
        llm_api_key="llm-key",
        embedding_api_key="embedding-key",
    )
    return {m["metadata"]["name"]: decoded(m) for m in manifests}


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
@pytest.mark.parametrize("deployment", sorted(SERVICES))
def test_the_service_accepts_its_rendered_settings(
    renderer: str,
    overlay: str,
    deployment: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resources = rendered(renderer, overlay)
    container_name, prefix, port = SERVICES[deployment]
    spec = pod_spec(the(resources, "Deployment", deployment))
    container = next(c for c in spec["containers"] if c["name"] == container_name)
    environment = materialize_environment(resources, spec, container, _secrets(), tmp_path)

    settings_class = SETTINGS[deployment]
    nemo_variables = {name for name in environment if name.startswith("NEMO_")}
    # Settings ignore unknown variables, so a misspelt one would silently do nothing.
    known = {f"{prefix}{name}".upper() for name in settings_class.model_fields}
    known |= {file_variable(settings_class, name) for name in secret_file_fields(settings_class)}
    unknown = nemo_variables - known
    assert unknown == set()
    # Besides the service's own and OpenTelemetry's, only uvicorn's proxy setting (MCP edge)
    # and where the AWS SDK finds static S3 keys (context).
    others = {name for name in environment if not name.startswith(("NEMO_", "OTEL_"))}
    assert others == {
        "nemo-toolplane": {"FORWARDED_ALLOW_IPS"},
        "nemo-context": {"AWS_SHARED_CREDENTIALS_FILE"},
    }.get(deployment, set())

    for name in list(os.environ):
        if name.startswith(("NEMO_", "OTEL_")):
            monkeypatch.delenv(name)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    settings: Any = settings_class()

    assert settings.listen_address == f"0.0.0.0:{port}"
    assert settings.caller_tokens
    environment_name = "production" if overlay == "prod" else "development"
    if deployment == "nemo-context":
        assert settings.pseudonym_key.get_secret_value() == "0123456789abcdef" * 4
        assert settings.identifier_key.get_secret_value() == "i" * 32
        assert settings.environment == environment_name
        assert settings.snapshot_backend == "s3"
        assert settings.database_url.get_secret_value().startswith("postgresql://nemo_context:")
    else:
        assert settings.client_token is not None
        assert settings.context_address == "nemo-context:50051"
    if deployment == "nemo-gateway":
        provider = {"prod": "openai", "dev-local-model": "local"}.get(overlay, "baseline")
        assert settings.provider == provider
        if provider == "local":
            # The component's server, and the model it serves on both tiers.
            assert settings.llm_base_url == "http://nemo-local-model:8000/v1"
            assert {settings.model_fast, settings.model_strong} == {"SmolLM2-135M-Instruct"}
        assert settings.llm_api_key.get_secret_value() == "llm-key"
        assert settings.embedding_api_key.get_secret_value() == "embedding-key"
    if deployment == "nemo-toolplane":
        assert settings.environment == environment_name
        assert settings.database_url.get_secret_value().startswith("postgresql://nemo_toolplane:")


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_console_accepts_its_rendered_settings(
    renderer: str, overlay: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resources = rendered(renderer, overlay)
    spec = pod_spec(the(resources, "Deployment", "nemo-console"))
    [container] = spec["containers"]
    secrets = _secrets()
    secrets["nemo-console-oidc"] = {"client-secret": "console-client-secret"}
    environment = materialize_environment(resources, spec, container, secrets, tmp_path)
    known = {f"NEMO_CONSOLE_{name}".upper() for name in ConsoleSettings.model_fields}
    known |= {file_variable(ConsoleSettings, n) for n in secret_file_fields(ConsoleSettings)}
    assert {name for name in environment if name.startswith("NEMO_")} - known == set()
    for name in list(os.environ):
        if name.startswith(("NEMO_", "OTEL_")):
            monkeypatch.delenv(name)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    settings = ConsoleSettings()
    # Published under a path, with Secure cookies; the people's API as the services name it.
    assert settings.root_path == "/console"
    assert settings.secure_cookies
    assert settings.client_token is not None
    assert settings.session_key_list()
    tool_plane = the(resources, "ConfigMap", _config_name(resources, "nemo-toolplane-config"))
    assert settings.people_audience == tool_plane["data"]["NEMO_TOOLPLANE_PEOPLE_AUDIENCE"]
    assert settings.oidc_issuer == tool_plane["data"]["NEMO_TOOLPLANE_PEOPLE_ISSUER"]
    assert settings.toolplane_address == "nemo-toolplane:50053"


def _config_name(resources: list[Any], prefix: str) -> str:
    """The generated name (with its content hash) of a ConfigMap."""
    [name] = [r["metadata"]["name"] for r in resources
              if r["kind"] == "ConfigMap" and r["metadata"]["name"].startswith(prefix)]  # fmt: skip
    return str(name)
