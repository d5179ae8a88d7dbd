"""Vietnamese-insensitive text matching: ``xac thuc`` finds ``xác thực``.

Folding decomposes each character (NFD), drops the combining marks, maps ``đ``/``Đ`` to ``d`` and
lowercases. It is done character by character so a position in the folded text maps back to the
original (snippets are cut from the original text around a folded match).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    if char in "đĐ":
        return "d"
    decomposed = unicodedata.normalize("NFD", char)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def fold(text: str) -> str:
    """``text`` without diacritics, lowercased."""
    return "".join(_fold_char(char) for char in text)


def fold_with_positions(text: str) -> tuple[str, list[int]]:
    """The folded text and, for each of its characters, the index of its original character."""
    folded: list[str] = []
    origins: list[int] = []
    for index, char in enumerate(text):
        piece = _fold_char(char)
        folded.append(piece)
        origins.extend([index] * len(piece))
    return "".join(folded), origins


def tokenize(text: str) -> list[str]:
    """Folded words (letters and digits) in order."""
    return _WORD.findall(fold(text))
