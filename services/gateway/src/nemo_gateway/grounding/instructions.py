"""Passages that read like instructions to the model rather than content.

Retrieved text can be written by anyone. The prompt already says that sources are data; these
patterns additionally flag the passages that try to give orders, so the caller sees them. Matching
runs on text with Vietnamese diacritics folded and in lower case, so the patterns are written
without diacritics.
"""

from __future__ import annotations

import re
import unicodedata

INSTRUCTION_PATTERNS: tuple[str, ...] = (
    # English
    r"\b(ignore|disregard|forget)\b.{0,40}\b(instructions?|directions?|rules|prompts?)\b",
    r"\b(reveal|print|show|repeat|leak)\b.{0,30}\bsystem prompt\b",
    r"\byou are now\b",
    r"\bnew instructions?\b",
    r"\b(from now on|henceforth)\b.{0,30}\b(you|answer|reply|respond)\b",
    r"\b(answer|reply|respond|say)\s+(only\s+)?that\b",
    # Vietnamese, diacritics folded
    r"\bbo qua\b.{0,40}\b(huong dan|chi dan|yeu cau|quy tac)\b",
    r"\b(tiet lo|in ra|hien thi)\b.{0,30}\b(system prompt|chi dan he thong|loi nhac he thong)\b",
    r"\btu (bay gio|nay)\b.{0,30}\b(ban|hay tra loi)\b",
    r"\bhay tra loi rang\b",
    r"\bchi dan moi\b",
)

_COMPILED = tuple(re.compile(pattern) for pattern in INSTRUCTION_PATTERNS)


def fold(text: str) -> str:
    """Lower case without Vietnamese diacritics (``đ`` becomes ``d``)."""
    decomposed = unicodedata.normalize("NFD", text.casefold().replace("đ", "d"))
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def looks_like_instructions(text: str) -> bool:
    """Whether ``text`` contains an instruction aimed at the model."""
    folded = " ".join(fold(text).split())
    return any(pattern.search(folded) for pattern in _COMPILED)
