"""Chat text is redacted with the gate's own rules: ids and field names masked."""

from __future__ import annotations

from nemo_context.conversation.redaction import (
    FIELD_MASK,
    MASK,
    OMITTED,
    mask_keys,
    redact_chat_text,
)
from nemo_context.gate import find_leak

FORBIDDEN = frozenset({"L-2041-1", "U-2041-P1", "F-2041-1"})


def test_keys_are_masked_case_insensitively_on_token_boundaries() -> None:
    text = "Mã của em là l-2041-1, mẹ em là U-2041-P1 (gia đình F-2041-1). Bạn L-2041-10 thì khác."
    masked = mask_keys(text, FORBIDDEN)
    assert (
        masked == f"Mã của em là {MASK}, mẹ em là {MASK} (gia đình {MASK}). Bạn L-2041-10 thì khác."
    )
    assert find_leak(masked, forbidden_values=FORBIDDEN) is None
    assert find_leak(text, forbidden_values=FORBIDDEN) is not None


def test_text_without_keys_is_unchanged() -> None:
    text = "Em tên là An, em học lớp 8."
    assert mask_keys(text, FORBIDDEN) == text
    assert mask_keys(text, frozenset()) == text


def test_forbidden_names_in_key_positions_are_masked_and_the_rest_kept() -> None:
    text = 'Từ mới: "name": tên, "node_title": "Phân số", "userId":1, "x" là "y"'
    redacted = redact_chat_text(text, FORBIDDEN)
    assert redacted == (
        f'Từ mới: "{FIELD_MASK}": tên, "node_title": "Phân số", "{FIELD_MASK}":1, "x" là "y"'
    )
    assert find_leak(redacted, forbidden_values=FORBIDDEN) is None
    assert find_leak(text, forbidden_values=FORBIDDEN) is not None


def test_a_name_spelled_with_a_json_escape_is_masked_too() -> None:
    assert redact_chat_text('{"\\u0065mail": 1}', FORBIDDEN) == f'{{"{FIELD_MASK}": 1}}'


def test_text_still_refused_after_masking_is_omitted() -> None:
    assert redact_chat_text('{"ref": "L\\u002d2041\\u002d1"}', FORBIDDEN) == OMITTED
    assert redact_chat_text("[" * 3000 + '"x"', FORBIDDEN) == OMITTED
    assert redact_chat_text('{"ref": "L\\u002d2041\\u002d10"}', FORBIDDEN) == '{"ref": "L\\u002d2041\\u002d10"}'
