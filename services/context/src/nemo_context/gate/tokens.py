"""Text as the identifier matchers read it: plain lower-case Latin letters and digits, in words.

A person's name, address or school is written with or without diacritics, in any case, in
full-width forms, with look-alike letters from other scripts or invisible characters inside it.
:func:`fold_plain` turns all of them into one spelling: compatibility forms decomposed (NFKD),
combining marks dropped, ``đ`` as ``d``, default-ignorable characters removed, letters that look
like Latin ones (Unicode's confusables data) replaced by them, lower case. The database folds the
stored values the same way (``learning.identifier_tokens``) before it fingerprints them, so the
two sides meet on the same words. A word is a run of ``a-z0-9`` in the folded text.

The fold is a translation table built once; where a folded character came from is worked out
only when something is found (:func:`origins_of`).
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import Final

from nemo_context.gate.text import ignorable_characters, look_alike_letters

_WORD: Final = re.compile(r"[a-z0-9]+")
VIETNAMESE_LOWER: Final = "àáảãạăằắẳẵặâầấẩẫậèéẻẽẹêềếểễệìíỉĩịòóỏõọôồốổỗộơờớởỡợùúủũụưừứửữựỳýỷỹỵđ"
"""The Vietnamese letters beyond ASCII, in lower case (upper case is ``.upper()`` of each)."""
_ACCENTED_WORD: Final = re.compile(f"[a-z0-9{VIETNAMESE_LOWER}]+")
_TO_LOWER: Final = str.maketrans(VIETNAMESE_LOWER.upper(), VIETNAMESE_LOWER)
_COMBINING: Final = range(0x300, 0x370)

#: Blocks whose characters fold to something else: Latin-1 and the Latin extensions (the
#: Vietnamese letters among them), combining marks, and the half- and full-width forms.
_FOLDED_BLOCKS: Final = (
    range(0x80, 0x250),
    range(0x300, 0x370),
    range(0x1E00, 0x1F00),
    range(0x2000, 0x2070),
    range(0xFF00, 0xFFF0),
)


def _fold_char(char: str) -> str:
    pieces: list[str] = []
    for piece in unicodedata.normalize("NFKD", char):
        if ord(piece) in _COMBINING:
            continue
        pieces.append("d" if piece in "đĐ" else piece)
    return "".join(pieces).lower()


@cache
def _table() -> dict[int, str]:
    table: dict[int, str] = {}
    for block in _FOLDED_BLOCKS:
        for code in block:
            folded = _fold_char(chr(code))
            if folded != chr(code):
                table[code] = folded
    for char, letters in look_alike_letters().items():
        table[ord(char)] = letters[0].lower()
    for char in ignorable_characters():
        table[ord(char)] = ""
    for code in range(ord("A"), ord("Z") + 1):
        table[code] = chr(code).lower()
    return table


@cache
def _soft_table() -> dict[int, str]:
    """Look-alike letters and invisible characters only: what hides a word, not its diacritics."""
    table: dict[int, str] = {
        ord(char): letters[0] for char, letters in look_alike_letters().items()
    }
    table.update((ord(char), "") for char in ignorable_characters())
    return table


def accented_words(text: str) -> list[str]:
    """The words of ``text`` in lower case with their Vietnamese diacritics, one for each of
    :func:`words` (as the database computes them: ``learning.identifier_accented_tokens``); the
    folded words when the two do not line up (letters outside Vietnamese)."""
    lowered = unicodedata.normalize("NFKC", text).translate(_TO_LOWER).lower()
    found = _ACCENTED_WORD.findall(lowered)
    folded = words(text)
    return found if len(found) == len(folded) else folded


def soft_fold(text: str) -> str:
    """``text`` as a person reads it: look-alike letters and invisible characters resolved,
    compatibility forms composed, lower case, the diacritics kept."""
    composed = unicodedata.normalize("NFKC", text.translate(_soft_table()))
    return composed.translate(_TO_LOWER).lower()


def prepare() -> None:
    """Build the translation tables now, so the first request does not."""
    _table()
    _soft_table()
    _uneven()


def fold_plain(text: str) -> str:
    """``text`` in the one spelling identifiers are compared in (see the module docstring)."""
    return text.translate(_table())


def words(text: str) -> list[str]:
    """The words of ``text`` once folded."""
    return _WORD.findall(fold_plain(text))


@cache
def _uneven() -> re.Pattern[str]:
    """Any character that folds to fewer or more than one character, as a class of ranges."""
    codes = sorted(code for code, folded in _table().items() if len(folded) != 1)
    ranges: list[tuple[int, int]] = []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    parts = (f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)
    return re.compile(f"[{''.join(parts)}]")


def origins_of(text: str) -> list[int]:
    """For each character of ``fold_plain(text)``, the index in ``text`` it came from (for
    masking what was found in the folded text where it is written)."""
    if _uneven().search(text) is None:
        return list(range(len(text)))  # one folded character for each
    table = _table()
    origins: list[int] = []
    for index, char in enumerate(text):
        piece = table.get(ord(char), char)
        origins.extend([index] * len(piece))
    return origins
