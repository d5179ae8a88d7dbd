"""Gateway settings: keys from env or mounted files, LLM and embedding keys kept apart, keys
never shown by repr."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic_settings import SettingsError

from nemo_gateway.settings import GatewaySettings


def test_the_default_provider_is_the_baseline_so_no_key_is_needed() -> None:
    settings = GatewaySettings()
    assert (settings.provider, settings.llm_api_key, settings.ai_enrichment_enabled) == (
        "baseline",
        None,
        True,
    )


def test_keys_come_from_their_own_files_and_never_stand_in_for_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = tmp_path / "llm"
    llm.write_text("llm-secret-from-file\n")
    monkeypatch.setenv("NEMO_GATEWAY_LLM_API_KEY_FILE", str(llm))
    only_llm = GatewaySettings()
    assert only_llm.llm_api_key is not None
    assert only_llm.llm_api_key.get_secret_value() == "llm-secret-from-file"
    assert only_llm.embedding_api_key is None

    embedding = tmp_path / "embedding"
    embedding.write_text("embedding-secret")
    monkeypatch.delenv("NEMO_GATEWAY_LLM_API_KEY_FILE")
    monkeypatch.setenv("NEMO_GATEWAY_EMBEDDING_API_KEY_FILE", str(embedding))
    only_embedding = GatewaySettings()
    assert only_embedding.llm_api_key is None
    assert only_embedding.embedding_api_key is not None


def test_a_key_and_its_file_together_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("x")
    monkeypatch.setenv("NEMO_GATEWAY_LLM_API_KEY_FILE", str(key_file))
    message = "NEMO_GATEWAY_LLM_API_KEY or NEMO_GATEWAY_LLM_API_KEY_FILE, not both"
    with pytest.raises(SettingsError, match=message):
        GatewaySettings(llm_api_key="y")
    monkeypatch.setenv("NEMO_GATEWAY_LLM_API_KEY", "y")
    with pytest.raises(SettingsError, match=message):
        GatewaySettings()


def test_repr_and_dumps_mask_the_keys() -> None:
    settings = GatewaySettings(llm_api_key="sk-visible-nowhere", embedding_api_key="emb-nowhere")
    for text in (repr(settings), str(settings.model_dump()), settings.model_dump_json()):
        assert "sk-visible-nowhere" not in text
        assert "emb-nowhere" not in text


def test_environment_variables_are_read_with_the_gateway_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NEMO_GATEWAY_PROVIDER", "anthropic")
    monkeypatch.setenv("NEMO_GATEWAY_AI_ENRICHMENT_ENABLED", "false")
    monkeypatch.setenv("NEMO_GATEWAY_MODEL_FAST", "claude-haiku")
    settings = GatewaySettings()
    assert (settings.provider, settings.ai_enrichment_enabled, settings.model_for("fast")) == (
        "anthropic",
        False,
        "claude-haiku",
    )


@pytest.mark.parametrize("value", ["true", "false", ""])
def test_a_removed_variable_is_refused_with_what_replaces_it(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("NEMO_GATEWAY_JSON_SCHEMA_MODE", value)
    with pytest.raises(ValidationError) as caught:
        GatewaySettings()
    message = str(caught.value)
    assert "NEMO_GATEWAY_JSON_SCHEMA_MODE" in message
    assert "NEMO_GATEWAY_STRUCTURED_OUTPUT" in message
    monkeypatch.delenv("NEMO_GATEWAY_JSON_SCHEMA_MODE")
    assert GatewaySettings().structured_output == "auto"
