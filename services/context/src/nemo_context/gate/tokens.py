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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Replacements:
    """The table as ``str.replace`` steps: each character beyond ASCII and what it folds to."""

    folded: dict[str, str]
    chained: frozenset[str]
    """Characters that fold to a character the table folds again (U+00B5 micro sign to Greek
    mu, which folds to "u"): replaced after the others, so what they fold to is not folded
    twice (Unicode's data has no longer chain)."""


@cache
def _replacements() -> _Replacements:
    folded = {chr(code): text for code, text in _table().items() if code >= 0x80}
    chained = frozenset(char for char, text in folded.items() if not folded.keys().isdisjoint(text))
    return _Replacements(folded, chained)


_ASCII_LOWER: Final = bytes(range(256)).translate(
    bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
)


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
    _replacements()
    _soft_table()
    _uneven()


def fold_plain(text: str) -> str:
    """``text`` in the one spelling identifiers are compared in (see the module docstring)."""
    if text.isascii():
        return text.lower()
    # One str.replace per distinct character beyond ASCII, then ASCII letters lowered as bytes
    # (non-ASCII bytes are all >= 0x80): a third of the cost of str.translate with the table.
    replacements = _replacements()
    present = replacements.folded.keys() & set(text)
    for char in (*(present - replacements.chained), *(present & replacements.chained)):
        text = text.replace(char, replacements.folded[char])
    return (
        text.encode("utf-8", "surrogatepass")
        .translate(_ASCII_LOWER)
        .decode("utf-8", "surrogatepass")
    )


def words(text: str) -> list[str]:
    """The words of ``text`` once folded."""
    return _WORD.findall(fold_plain(text))


Token = tuple[str, int, int]
"""A word of folded text and where it is: ``(word, start, end)``."""

_SPACED: Final = re.compile(r"(?=[a-z])(?<![a-z0-9])[a-z](?:[ .\-_][a-z](?![a-z0-9]))+")
"""Two letters or more written one by one, each a space, a dot, a hyphen or an underscore from
the next ("T r a n", "N.g.o.c", "A N"): a word spaced out so that no word of it is a name."""


def tokens(folded: str) -> list[Token]:
    """The words of folded text, each with where it is."""
    return [(match.group(), match.start(), match.end()) for match in _WORD.finditer(folded)]


def spaced_words(folded: str) -> list[Token]:
    """The words of folded text written letter by letter, each as its letters run together
    ("t r a n" is "tran"), with where each is (its letters stand two characters apart)."""
    return [(match.group()[::2], match.start(), match.end()) for match in _SPACED.finditer(folded)]


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
