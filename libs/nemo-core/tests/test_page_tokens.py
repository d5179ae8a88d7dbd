"""Page tokens: what a listing hands out comes back as it was; nothing else gets through."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_core.page_tokens import (
    MAX_TOKEN_CHARS,
    InvalidPageToken,
    Position,
    decode_page_token,
    encode_page_token,
)

positions = st.lists(
    st.one_of(st.text(max_size=40), st.integers(min_value=-(2**63), max_value=2**63 - 1)),
    min_size=1,
    max_size=3,
)
listings = st.text(min_size=1, max_size=20)


@given(listings, positions)
def test_a_token_round_trips_its_position(listing: str, position: list[Position]) -> None:
    token = encode_page_token(listing, *position)
    assert token.isascii()
    assert "=" not in token
    assert decode_page_token(token, listing, len(position)) == position


@given(listings, listings, positions)
def test_a_token_of_one_listing_is_refused_by_another(
    listing: str, other: str, position: list[Position]
) -> None:
    token = encode_page_token(listing, *position)
    if other != listing:
        with pytest.raises(InvalidPageToken):
            decode_page_token(token, other, len(position))
    with pytest.raises(InvalidPageToken):
        decode_page_token(token, listing, len(position) + 1)


@given(st.one_of(st.text(max_size=600), st.binary(max_size=300).map(base64.urlsafe_b64encode)))
def test_any_input_is_a_position_or_invalid_never_another_error(token: str | bytes) -> None:
    text = token.decode() if isinstance(token, bytes) else token
    try:
        position = decode_page_token(text, "audit", 1)
    except InvalidPageToken:
        return
    [value] = position
    assert isinstance(value, str | int)
    assert not isinstance(value, bool)


def _raw(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not base64!",
        _raw(["audit"]),  # no position
        _raw(["audit", 1, 2]),  # a position of another length
        _raw(["audit", 1.5]),
        _raw(["audit", True]),
        _raw(["audit", None]),
        _raw(["audit", [1]]),
        _raw({"audit": 1}),
        _raw("audit"),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),  # not UTF-8
        "A" * (MAX_TOKEN_CHARS + 1),
        _raw(["audit", "x" * MAX_TOKEN_CHARS]),
    ],
)
def test_what_no_listing_hands_out_is_refused(token: str) -> None:
    with pytest.raises(InvalidPageToken):
        decode_page_token(token, "audit", 1)


def test_padding_is_optional_and_alphabet_strict() -> None:
    token = encode_page_token("audit", 42)
    padded = token + "=" * (-len(token) % 4)
    assert decode_page_token(padded, "audit", 1) == [42]
    with pytest.raises(InvalidPageToken):
        decode_page_token(token[:-1] + "*", "audit", 1)
