"""The README stays true: its settings section is exactly what `nemo settings` prints."""

from __future__ import annotations

from pathlib import Path

from nemo_ops.settings_doc import render_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_settings_section_matches_the_settings_classes() -> None:
    text = README.read_text(encoding="utf-8")
    begin, end = "<!-- settings:begin -->\n", "<!-- settings:end -->"
    section = text[text.index(begin) + len(begin) : text.index(end)]
    assert section == render_markdown(), (
        "README settings are stale: replace the section with the output of `nemo settings`"
    )


def test_every_service_variable_is_documented() -> None:
    rendered = render_markdown()
    for variable in (
        "NEMO_CONTEXT_DATABASE_URL",
        "NEMO_GATEWAY_CONTEXT_ADDRESS",
        "NEMO_TOOLPLANE_MCP_PORT",
        "NEMO_<SERVICE>_GRACE_PERIOD_SECONDS",
        "NEMO_<SERVICE>_CALLER_TOKENS_FILE",
    ):
        assert f"`{variable}`" in rendered
