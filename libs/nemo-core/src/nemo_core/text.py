"""Text compared the way a reader compares it: ``xac thuc`` finds ``Xác thực``.

:func:`fold` is the one folding rule of the services (knowledge search, docs search, the
gateway's instruction and claim checks):

- invisible characters (zero-width spaces and joiners, bidirectional controls, soft hyphens) are
  removed, so a zero-width space inside a word does not split it;
- compatibility forms that only change the look are read as plain characters (NFKD: full-width
  letters, ligatures, mathematical and circled letters); superscripts, subscripts and vulgar
  fractions, which change the value (``x²`` is not ``x2``), stay as they are;
- combining marks are dropped, so Vietnamese tone and vowel marks go;
- case is folded (``casefold``: ``ß`` is ``ss``) and ``đ``, which has no decomposition, is ``d``.

Every step maps one character to zero or more characters on its own, so a text is folded
character by character (cached: ordinary text repeats a few hundred characters), and
:func:`fold_with_positions` maps a folded match back to the original text. The knowledge
tables repeat the Vietnamese part of the rule in SQL (``knowledge.fold_vi``).
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache, lru_cache
from typing import Final

INVISIBLE: Final = re.compile("[\u00ad\u034f\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
"""Characters a reader does not see: soft hyphen, combining grapheme joiner, Mongolian vowel
separator, zero-width spaces and joiners, directional marks, embeddings and overrides, word
joiner and invisible operators, byte order mark."""

_WORD: Final = re.compile(r"[a-z0-9]+")
_VALUE_TAGS: Final = ("<super>", "<sub>", "<fraction>")


@cache
def _value_forms() -> frozenset[str]:
    """The characters whose compatibility decomposition would change what they mean."""
    # They live in the first two planes: a scan of about 130,000 code points, done once.
    return frozenset(
        chr(code)
        for code in range(0x20000)
        if unicodedata.decomposition(chr(code)).startswith(_VALUE_TAGS)
    )


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    if INVISIBLE.match(char):
        return ""
    decomposed = unicodedata.normalize("NFD" if char in _value_forms() else "NFKD", char)
    bare = "".join(mark for mark in decomposed if not unicodedata.combining(mark))
    return bare.casefold().replace("đ", "d")


def fold(text: str) -> str:
    """``text`` without invisible characters and diacritics, compatibility forms read as plain
    ones, case folded: ``"Hệ số góc"`` is ``"he so goc"``."""
    if text.isascii():  # nothing to remove or decompose; casefold is lower for ASCII
        return text.lower()
    return "".join(map(_fold_char, text))


def fold_with_positions(text: str) -> tuple[str, list[int]]:
    """``fold(text)`` and, for each of its characters, the index in ``text`` it came from."""
    folded: list[str] = []
    origins: list[int] = []
    for index, char in enumerate(text):
        piece = _fold_char(char)
        folded.append(piece)
        origins.extend([index] * len(piece))
    return "".join(folded), origins


def words(text: str) -> list[str]:
    """The folded words of ``text`` (runs of ASCII letters and digits), in order."""
    return _WORD.findall(fold(text))


def is_significant(word: str) -> bool:
    """Whether a folded word takes part in matching: single letters do not (in questions and chat
    they are variables, ``x + 3``, or particles, ``ạ``, and would match any text with an ``a``)."""
    return len(word) > 1 or word.isdigit()
