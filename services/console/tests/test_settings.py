"""The console's settings: outside development it refuses to start without what keeps people's
sessions and sign-in safe."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from nemo_console.settings import ConsoleSettings

PRODUCTION: dict[str, Any] = {
    "environment": "production",
    "public_url": "https://app.example.com/console/",
    "session_keys": "k" * 32,
    "oidc_issuer": "https://login.example.com",
    "oidc_client_secret": "secret",
    "people_audience": "https://app.example.com/console/people",
}


def test_a_production_console_with_everything_starts_under_its_path() -> None:
    settings = ConsoleSettings(**PRODUCTION)
    assert settings.root_path == "/console"
    assert settings.public_url == "https://app.example.com/console"
    assert settings.secure_cookies


@pytest.mark.parametrize(
    "change",
    [
        {"session_keys": None},
        {"session_keys": "short"},
        {"session_keys": "k" * 32 + ",short"},
        {"oidc_issuer": None},
        {"oidc_client_secret": None},
        {"people_audience": None},
        {"public_url": "http://app.example.com/console"},
        {"public_url": "https://app.example.com/console?x=1"},
        {"public_url": "/console"},
    ],
)
def test_a_production_console_missing_a_safeguard_does_not_start(change: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ConsoleSettings(**{**PRODUCTION, **change})
