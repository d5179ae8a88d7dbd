"""Settings: environment and file sources, validation, secrets never shown."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from nemo_core_echo import TOKENS, EchoSettings
from pydantic import ValidationError

from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY, ServiceSettings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("NEMO_ECHO_"):
            monkeypatch.delenv(name)


def test_defaults() -> None:
    settings = EchoSettings()
    assert settings.drain_seconds == 0
    assert settings.grace_period_seconds == 10
    assert (
        settings.caller_token_metadata_key
        == DEFAULT_CALLER_TOKEN_METADATA_KEY
        == "x-nemo-caller-token"
    )
    assert settings.caller_tokens == {}
    assert settings.tls_files() is None


def test_every_setting_is_documented() -> None:
    undocumented = [name for name, f in ServiceSettings.model_fields.items() if not f.description]
    assert undocumented == []


def test_values_come_from_prefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEMO_ECHO_CALLER_TOKENS", json.dumps(TOKENS))
    monkeypatch.setenv("NEMO_ECHO_LISTEN_ADDRESS", "0.0.0.0:50051")
    monkeypatch.setenv("NEMO_ECHO_DRAIN_SECONDS", "5")
    monkeypatch.setenv("NEMO_ECHO_CLIENT_TOKEN", "client-token-0123456789")
    settings = EchoSettings()
    assert settings.caller_tokens["gateway"].get_secret_value() == TOKENS["gateway"]
    assert settings.listen_address == "0.0.0.0:50051"
    assert settings.drain_seconds == 5
    assert settings.client_token is not None
    assert settings.client_token.get_secret_value() == "client-token-0123456789"


def test_secrets_come_from_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokens_file = tmp_path / "caller-tokens.json"
    tokens_file.write_text(json.dumps(TOKENS) + "\n")
    token_file = tmp_path / "client-token"
    token_file.write_text("file-token-0123456789\n")
    monkeypatch.setenv("NEMO_ECHO_CALLER_TOKENS_FILE", str(tokens_file))
    monkeypatch.setenv("NEMO_ECHO_CLIENT_TOKEN_FILE", str(token_file))
    settings = EchoSettings()
    assert {k: v.get_secret_value() for k, v in settings.caller_tokens.items()} == TOKENS
    assert settings.client_token is not None
    assert settings.client_token.get_secret_value() == "file-token-0123456789"


def test_secrets_are_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEMO_ECHO_CALLER_TOKENS", json.dumps(TOKENS))
    monkeypatch.setenv("NEMO_ECHO_CLIENT_TOKEN", "client-token-0123456789")
    settings = EchoSettings()
    shown = [repr(settings), str(settings), settings.model_dump_json()]
    for secret in [*TOKENS.values(), "client-token-0123456789"]:
        assert not [text for text in shown if secret in text]


@pytest.mark.parametrize(
    "values",
    [
        {"caller_tokens": {"gateway": "short"}},
        {"caller_tokens": {"gateway": "same-token-0123456789", "other": "same-token-0123456789"}},
        {"caller_tokens": {"Gateway": "gateway-token-0123456789"}},
        {"tls_cert_file": "/tls/cert.pem"},
        {"listen_address": "50051"},
        {"listen_address": "localhost:99999"},
        {"listen_address": "localhost:50051\n"},
        {"caller_tokens": {"gateway\n": "gateway-token-0123456789"}},
        {"caller_token_metadata_key": "X-Token"},
        {"caller_token_metadata_key": "x-token-bin"},
        {"grace_period_seconds": -1},
        {"max_concurrent_rpcs": 0},
    ],
)
def test_invalid_settings_are_rejected(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        EchoSettings(**values)  # type: ignore[arg-type]


def test_token_and_token_file_are_exclusive(tmp_path: Path) -> None:
    token_file = tmp_path / "client-token"
    token_file.write_text("file-token-0123456789")
    with pytest.raises(ValidationError, match="not both"):
        EchoSettings(client_token="env-token-0123456789", client_token_file=token_file)


@pytest.mark.parametrize("address", ["127.0.0.1:0", "[::]:50051", "0.0.0.0:8080", "localhost:1"])
def test_listen_addresses(address: str) -> None:
    assert EchoSettings(listen_address=address).listen_address == address
