"""Keys typed into chat text are masked with the gate's own matching rule."""

from __future__ import annotations

from nemo_context.conversation.redaction import MASK, mask_keys
from nemo_context.gate import find_leak

FORBIDDEN = frozenset({"L-1", "U-P1", "F-1"})


def test_keys_are_masked_case_insensitively_on_token_boundaries() -> None:
    text = "Mã của em là l-1, mẹ em là U-P1 (gia đình F-1). Bạn L-10 thì khác."
    masked = mask_keys(text, FORBIDDEN)
    assert masked == f"Mã của em là {MASK}, mẹ em là {MASK} (gia đình {MASK}). Bạn L-10 thì khác."
    assert find_leak(masked, forbidden_values=FORBIDDEN) is None
    assert find_leak(text, forbidden_values=FORBIDDEN) is not None


def test_text_without_keys_is_unchanged() -> None:
    text = "Em tên là An, em học lớp 8."
    assert mask_keys(text, FORBIDDEN) == text
    assert mask_keys(text, frozenset()) == text
