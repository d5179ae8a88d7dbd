"""The folding tables are built when the service starts, not by its first request."""

from __future__ import annotations

from nemo_context.gate import tokens


def test_prepare_builds_every_folding_table() -> None:
    tables = (tokens._replacements, tokens._soft_table, tokens._uneven)
    for table in tables:
        table.cache_clear()
    tokens.prepare()
    assert [table.cache_info().currsize for table in tables] == [1, 1, 1]
