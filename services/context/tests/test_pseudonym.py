"""learner_ref: a keyed, stable pseudonym, never the id; production refuses to run without a key."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_settings import SettingsError

from nemo_context.pseudonym import Pseudonymizer, pseudonymizer_from_settings
from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY, ContextSettings

KEY = "k" * 40


def _settings(**values: Any) -> ContextSettings:
    return ContextSettings(database_url="postgresql://nemo_context@localhost/nemo", **values)


def test_ref_is_nemo_and_24_hex_of_the_keyed_hmac() -> None:
    ref = Pseudonymizer(KEY.encode()).learner_ref("L-2041-1")
    expected = hmac.new(KEY.encode(), b"L-2041-1", hashlib.sha256).hexdigest()[:24]
    assert ref == f"nemo_{expected}"
    assert re.fullmatch(r"nemo_[0-9a-f]{24}", ref)
    assert "L-2041-1" not in ref


def test_same_key_gives_the_same_ref_in_every_instance() -> None:
    first = pseudonymizer_from_settings(_settings(pseudonym_key=KEY))
    second = pseudonymizer_from_settings(_settings(pseudonym_key=KEY))
    assert first.learner_ref("L-2041-1") == second.learner_ref("L-2041-1")


def test_another_key_or_another_learner_gives_another_ref() -> None:
    refs = {
        Pseudonymizer(KEY.encode()).learner_ref("L-2041-1"),
        Pseudonymizer(("x" * 40).encode()).learner_ref("L-2041-1"),
        Pseudonymizer(KEY.encode()).learner_ref("L-2041-10"),
    }
    assert len(refs) == 3


def test_unkeyed_hashes_of_the_id_do_not_give_the_ref() -> None:
    ref = Pseudonymizer(KEY.encode()).learner_ref("L-2041-1")
    for candidate in ("L-2041-1", "nemo12:learner-context:L-2041-1"):
        assert hashlib.sha256(candidate.encode()).hexdigest()[:12] != ref.removeprefix("nemo_")


def test_key_file_is_read_and_stripped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "pseudonym.key"
    key_file.write_text(KEY + "\n")
    monkeypatch.setenv("NEMO_CONTEXT_PSEUDONYM_KEY_FILE", str(key_file))
    from_file = pseudonymizer_from_settings(_settings())
    assert from_file.learner_ref("L-2041-1") == Pseudonymizer(KEY.encode()).learner_ref("L-2041-1")


@pytest.mark.parametrize("environment", ["staging", "production"])
def test_outside_development_the_service_refuses_to_start_without_a_key(
    environment: str,
) -> None:
    with pytest.raises(ValidationError, match="needs a pseudonym key"):
        _settings(environment=environment)


def test_a_short_key_is_refused() -> None:
    with pytest.raises(ValidationError, match="at least 32 characters"):
        _settings(pseudonym_key="short", environment="production")


def test_key_and_key_file_together_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "pseudonym.key"
    key_file.write_text(KEY)
    monkeypatch.setenv("NEMO_CONTEXT_PSEUDONYM_KEY_FILE", str(key_file))
    with pytest.raises(SettingsError, match="not both"):
        _settings(pseudonym_key=KEY)


def test_development_without_a_key_uses_a_random_key_and_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="nemo_context.pseudonym"):
        first = pseudonymizer_from_settings(_settings())
        second = pseudonymizer_from_settings(_settings())
    assert first.learner_ref("L-2041-1") != second.learner_ref("L-2041-1")
    assert any("random key" in record.getMessage() for record in caplog.records)


#: Each secret key the service refuses to run without outside development, and a valid value.
SECRET_KEYS = {
    "pseudonym_key": ("pseudonym key", KEY),
    "identifier_key": ("identifier key", "i" * 32),
    "snapshot_master_key": ("snapshot master key", "m" * 32),
}


@pytest.mark.parametrize("environment", ["staging", "production"])
@pytest.mark.parametrize("field", sorted(SECRET_KEYS))
def test_outside_development_each_secret_key_is_required_and_long(
    environment: str, field: str
) -> None:
    valid = {name: value for name, (_, value) in SECRET_KEYS.items()}
    what = SECRET_KEYS[field][0]
    article = "an" if what.startswith("i") else "a"
    with pytest.raises(ValidationError, match=f"needs {article} {what}"):
        _settings(**{**valid, field: None}, environment=environment)
    with pytest.raises(ValidationError, match=f"{what} must be at least 32 characters"):
        _settings(**{**valid, field: "short"}, environment=environment)
    settings = _settings(**valid, environment=environment)
    assert settings.identifier_key_bytes() == b"i" * 32


def test_in_development_the_identifier_key_is_the_one_the_seed_registers() -> None:
    assert _settings().identifier_key_bytes() == DEVELOPMENT_IDENTIFIER_KEY.encode()
