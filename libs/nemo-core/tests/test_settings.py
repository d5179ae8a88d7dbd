"""Settings: environment and file sources, validation, secrets never shown."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path

import pytest
from nemo_core_echo import TOKENS, EchoSettings
from pydantic import ValidationError
from pydantic_settings import SettingsError

from nemo_core.settings import (
    DEFAULT_CALLER_TOKEN_METADATA_KEY,
    EXIT_INVALID_SETTINGS,
    ServiceSettings,
    load_settings,
)

SECRET = "hunter2-Pa55w0rd-0f-the-database"
SHORT_TOKEN = "tiny-secret"


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
        {"max_connection_age_seconds": 0},
    ],
)
def test_invalid_settings_are_rejected(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        EchoSettings(**values)  # type: ignore[arg-type]


def test_token_and_token_file_are_exclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "client-token"
    token_file.write_text("file-token-0123456789")
    monkeypatch.setenv("NEMO_ECHO_CLIENT_TOKEN_FILE", str(token_file))
    with pytest.raises(SettingsError, match="not both"):
        EchoSettings(client_token="env-token-0123456789")


@pytest.mark.parametrize("address", ["127.0.0.1:0", "[::]:50051", "0.0.0.0:8080", "localhost:1"])
def test_listen_addresses(address: str) -> None:
    assert EchoSettings(listen_address=address).listen_address == address


def _invalid_settings_report(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, **env: str
) -> str:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.ERROR), pytest.raises(SystemExit) as exited:
        load_settings(EchoSettings)
    assert exited.value.code == EXIT_INVALID_SETTINGS
    (record,) = [r for r in caplog.records if r.getMessage() == "invalid settings"]
    assert record.exc_info is None
    return json.dumps(record.__dict__["problems"])


@pytest.mark.parametrize(
    ("tokens", "problem"),
    [
        ({"gateway": SHORT_TOKEN}, "token of caller 'gateway' is shorter than 16 characters"),
        ({SECRET: "gateway-token-0123456789"}, "a caller identity is not a lowercase name"),
        ({"gateway": SECRET, "toolplane": SECRET}, "two caller identities share one token"),
    ],
)
def test_invalid_settings_are_reported_without_values(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tokens: dict[str, str],
    problem: str,
) -> None:
    report = _invalid_settings_report(
        monkeypatch,
        caplog,
        NEMO_ECHO_CALLER_TOKENS=json.dumps(tokens),
        NEMO_ECHO_CLIENT_TOKEN=f"{SECRET}-client",
    )
    assert problem in report
    assert SECRET not in report
    assert SHORT_TOKEN not in report


def test_each_bad_variable_is_named(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    report = _invalid_settings_report(
        monkeypatch,
        caplog,
        NEMO_ECHO_MAX_CONCURRENT_RPCS="many",
        NEMO_ECHO_LOG_LEVEL=SECRET,
        NEMO_ECHO_CALLER_TOKENS=json.dumps({"gateway": [SECRET]}),
    )
    for variable in ("NEMO_ECHO_MAX_CONCURRENT_RPCS", "NEMO_ECHO_LOG_LEVEL"):
        assert variable in report
    assert "NEMO_ECHO_CALLER_TOKENS: Input should be a valid string" in report
    assert SECRET not in report


def test_a_variable_that_is_not_json_is_reported_without_its_value(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    report = _invalid_settings_report(
        monkeypatch, caplog, NEMO_ECHO_CALLER_TOKENS=f'{{"gateway": "{SECRET}"'
    )
    assert "caller_tokens" in report
    assert SECRET not in report


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            json.dumps({"gateway": [SECRET]}),
            "NEMO_ECHO_CALLER_TOKENS: Input should be a valid string",
        ),
        (f'{{"gateway": {SECRET}', "NEMO_ECHO_CALLER_TOKENS_FILE must hold JSON"),
    ],
)
def test_a_bad_secret_file_is_reported_without_its_content(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    content: str,
    problem: str,
) -> None:
    tokens_file = tmp_path / "caller-tokens.json"
    tokens_file.write_text(content)
    report = _invalid_settings_report(
        monkeypatch, caplog, NEMO_ECHO_CALLER_TOKENS_FILE=str(tokens_file)
    )
    assert problem in report
    assert SECRET not in report


def test_a_missing_secret_file_is_reported(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    missing = tmp_path / "client-token"
    report = _invalid_settings_report(monkeypatch, caplog, NEMO_ECHO_CLIENT_TOKEN_FILE=str(missing))
    assert f"cannot read {missing}" in report


_SERVICE_ENVIRONMENTS = {
    "nemo_context": {
        "NEMO_CONTEXT_DATABASE_URL": f"postgresql://nemo_context:{SECRET}@db.invalid/nemo",
        "NEMO_CONTEXT_CALLER_TOKENS": json.dumps({"gateway": SHORT_TOKEN}),
    },
    "nemo_gateway": {
        "NEMO_GATEWAY_CLIENT_TOKEN": SECRET,
        "NEMO_GATEWAY_CALLER_TOKENS": json.dumps({"internal": SHORT_TOKEN}),
    },
    "nemo_toolplane": {
        "NEMO_TOOLPLANE_DATABASE_URL": f"postgresql://nemo_toolplane:{SECRET}@db.invalid/nemo",
        "NEMO_TOOLPLANE_CALLER_TOKENS": json.dumps({"gateway": SHORT_TOKEN}),
    },
}


@pytest.mark.parametrize("module", sorted(_SERVICE_ENVIRONMENTS))
async def test_a_service_with_invalid_settings_exits_without_showing_secrets(module: str) -> None:
    # Only the variables given here: none inherited from the environment running the tests.
    clean = {name: value for name, value in os.environ.items() if not name.startswith("NEMO_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        env=clean | _SERVICE_ENVIRONMENTS[module],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=60)
    output = (stdout + stderr).decode()
    assert proc.returncode == EXIT_INVALID_SETTINGS, output
    assert SECRET not in output
    assert SHORT_TOKEN not in output
    assert "Traceback" not in output
    (entry,) = [json.loads(line) for line in output.splitlines() if "invalid settings" in line]
    assert entry["level"] == "ERROR"
    assert "shorter than 16 characters" in json.dumps(entry["problems"])
