"""Opaque page tokens (AIP-158), one format for every list method.

A token is the URL-safe base64 (unpadded) of a compact JSON array: the listing's name, then the
position the next page continues after (a few strings or integers: a time and an id, an id...).
The name keeps one listing's tokens out of another. The format is private: callers treat a token
as an opaque string and hand back what ``next_page_token`` gave them. Anything a listing did not
hand out is :class:`InvalidPageToken`, which handlers answer with INVALID_ARGUMENT; what a
position's values may be (a time zone, an id's shape, a range) the listing checks itself.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TypeAlias

#: A value of a position: what JSON carries exactly, and nothing a listing cannot compare.
Position: TypeAlias = str | int

#: Longer than any token a listing hands out; a longer one is refused before it is decoded.
MAX_TOKEN_CHARS = 512


class InvalidPageToken(ValueError):
    """A page token this listing did not hand out."""

    def __init__(self) -> None:
        super().__init__("invalid page token")


def encode_page_token(listing: str, *position: Position) -> str:
    """The token for the page after ``position`` in ``listing``."""
    raw = json.dumps([listing, *position], ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode("ascii").rstrip("=")


def decode_page_token(token: str, listing: str, size: int) -> list[Position]:
    """The ``size`` values of the position a token of ``listing`` carries; :class:`InvalidPageToken`
    for anything else (not this format, another listing's, a position of another length, a value
    that is neither a string nor an integer)."""
    if len(token) > MAX_TOKEN_CHARS or not token.isascii():
        raise InvalidPageToken
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        decoded = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeError, ValueError):
        raise InvalidPageToken from None
    if not isinstance(decoded, list) or len(decoded) != size + 1 or decoded[0] != listing:
        raise InvalidPageToken
    position = decoded[1:]
    # bool is an int to Python, never a position.
    if not all(isinstance(value, str | int) and not isinstance(value, bool) for value in position):
        raise InvalidPageToken
    return position
