"""Secret files: a marked setting comes from the file its _FILE variable names, never from both."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict, SettingsError

from nemo_core.secret_files import (
    SECRET_FILE,
    file_variable,
    read_secret_file,
    secret_file_fields,
)
from nemo_core.settings import ServiceSettings

SECRET = "file-secret-0123456789"


class _Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="NEMO_SF_")

    api_key: Annotated[SecretStr | None, SECRET_FILE] = Field(None, description="A key.")
    plain: str = Field("default", description="Not a secret.")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("NEMO_SF_"):
            monkeypatch.delenv(name)


def test_the_marked_fields_and_their_variables() -> None:
    assert set(secret_file_fields(_Settings)) == {
        "api_key",
        "caller_tokens",
        "previous_caller_tokens",
        "client_token",
    }
    assert file_variable(_Settings, "api_key") == "NEMO_SF_API_KEY_FILE"


_whitespace = st.text(alphabet=" \t\r\n", max_size=3)
_secrets = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), min_size=1
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_whitespace, _secrets, _whitespace)
def test_a_secret_is_the_file_without_surrounding_whitespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before: str, secret: str, after: str
) -> None:
    path = tmp_path / "key"
    path.write_text(before + secret + after, encoding="utf-8")
    assert read_secret_file(path) == secret
    monkeypatch.setenv("NEMO_SF_API_KEY_FILE", str(path))
    loaded = _Settings().api_key
    assert loaded is not None
    assert loaded.get_secret_value() == secret


def test_json_secrets_are_read_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"gateway": SECRET}) + "\n")
    monkeypatch.setenv("NEMO_SF_CALLER_TOKENS_FILE", str(path))
    assert _Settings().caller_tokens["gateway"].get_secret_value() == SECRET


def test_broken_json_is_refused_without_its_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(f'{{"gateway": {SECRET}')
    monkeypatch.setenv("NEMO_SF_CALLER_TOKENS_FILE", str(path))
    with pytest.raises(SettingsError) as refused:
        _Settings()
    assert str(refused.value) == "NEMO_SF_CALLER_TOKENS_FILE must hold JSON"
    assert refused.value.__cause__ is None


@pytest.mark.parametrize("where", ["environment", "constructor"])
def test_a_secret_and_its_file_together_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    path = tmp_path / "key"
    path.write_text(SECRET)
    monkeypatch.setenv("NEMO_SF_API_KEY_FILE", str(path))
    given: dict[str, Any] = {}
    if where == "environment":
        monkeypatch.setenv("NEMO_SF_API_KEY", "other-secret-0123456789")
    else:
        given["api_key"] = SecretStr("other-secret-0123456789")
    with pytest.raises(SettingsError) as refused:
        _Settings(**given)
    assert str(refused.value) == "set NEMO_SF_API_KEY or NEMO_SF_API_KEY_FILE, not both"


def test_an_empty_file_variable_names_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEMO_SF_API_KEY_FILE", "")
    monkeypatch.setenv("NEMO_SF_API_KEY", SECRET)
    loaded = _Settings().api_key
    assert loaded is not None
    assert loaded.get_secret_value() == SECRET


def test_settings_that_are_not_marked_never_come_from_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "plain"
    path.write_text("from-a-file")
    monkeypatch.setenv("NEMO_SF_PLAIN_FILE", str(path))
    assert _Settings().plain == "default"


def test_a_missing_file_fails_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nowhere"
    monkeypatch.setenv("NEMO_SF_API_KEY_FILE", str(missing))
    with pytest.raises(FileNotFoundError) as failed:
        _Settings()
    assert failed.value.filename == str(missing)
