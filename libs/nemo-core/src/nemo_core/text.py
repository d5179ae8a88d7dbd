"""Text compared the way a reader compares it: ``xac thuc`` finds ``Xác thực``.

:func:`fold` is the one folding rule of the services (knowledge search, docs search, the
gateway's instruction and claim checks):

- invisible characters (Unicode's default-ignorable code points: zero-width spaces and joiners,
  bidirectional controls and isolates, soft hyphens, variation selectors, the tag characters of
  U+E0000 to U+E0FFF) are removed, so a zero-width space inside a word does not split it and
  text written in tag characters, which renders as nothing, reads as nothing;
- compatibility forms that only change the look are read as plain characters (NFKD: full-width
  letters, ligatures, mathematical and circled letters); superscripts, subscripts and vulgar
  fractions, which change the value (``x²`` is not ``x2``), stay as they are;
- combining marks are dropped, so Vietnamese tone and vowel marks go;
- case is folded (``casefold``: ``ß`` is ``ss``) and ``đ``, which has no decomposition, is ``d``.

:func:`fold_lookalikes` is the same rule for checks that text must pass (instructions aimed at a
model, links, identifiers, score claims in learner-facing text): on top of :func:`fold`, decimal
digits of every script read as ASCII digits and a character that Unicode's confusables data (as
the ``confusable-homoglyphs`` package ships it) says looks like one printable ASCII character
reads as that character, so Cyrillic small o (U+043E) is ``o`` and U+2044 FRACTION SLASH is ``/``.

Every step maps one character to zero or more characters on its own, so a text is folded
character by character (cached: ordinary text repeats a few hundred characters), and
:func:`fold_with_positions` maps a folded match back to the original text. The knowledge
tables repeat the Vietnamese part of the rule in SQL (``knowledge.fold_vi``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from functools import cache, lru_cache
from importlib.resources import files
from typing import Final

import confusable_homoglyphs

_IGNORABLE_BEYOND_FORMAT: Final = (
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u2065\u3164\uffa0"
    "\ufe00-\ufe0f\ufff0-\ufff8\U000e0000-\U000e0fff"
)
"""Default-ignorable code points that are not format characters: the combining grapheme
joiner, Hangul fillers, Khmer inherent vowels, Mongolian variation selectors, the variation
selectors, the code points Unicode reserves as ignorable, and the whole of U+E0000 to U+E0FFF
(tags, variation selectors supplement, reserved)."""


def _format_ranges() -> str:
    """The format characters (category Cf) of the first two planes as character-class ranges;
    the others live in U+E0000 to U+E0FFF, covered above."""
    ranges: list[str] = []
    start = previous = -2
    for code in range(0x20000):
        if unicodedata.category(chr(code)) != "Cf":
            continue
        if code != previous + 1:
            if start >= 0:
                ranges.append(_char_range(start, previous))
            start = code
        previous = code
    ranges.append(_char_range(start, previous))
    return "".join(ranges)


def _char_range(start: int, end: int) -> str:
    return (
        re.escape(chr(start)) if start == end else f"{re.escape(chr(start))}-{re.escape(chr(end))}"
    )


INVISIBLE: Final = re.compile(f"[\u00ad{_format_ranges()}{_IGNORABLE_BEYOND_FORMAT}]")
"""Characters a reader does not see: the format characters (soft hyphen, zero-width spaces and
joiners, directional marks, embeddings, overrides and isolates, word joiner and invisible
operators, byte order mark, tag characters) and the other default-ignorable code points."""

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
    return _with_positions(text, _fold_char)


@cache
def _look_alikes() -> dict[str, str]:
    """Each character that Unicode's confusables data pairs with exactly one printable ASCII
    character (space aside), and that character; pairs of ASCII characters (``0`` and ``O``)
    are left alone, since digits and letters must stay what they are."""
    data = json.loads(
        files(confusable_homoglyphs).joinpath("confusables.json").read_text(encoding="utf-8")
    )
    targets: dict[str, set[str]] = {}
    for char, entries in data.items():
        for entry in entries:
            other = entry["c"].strip("\u200e\u200f")  # the data wraps right-to-left characters
            if len(char) != 1 or len(other) != 1 or char.isascii() == other.isascii():
                continue
            plain, look_alike = (char, other) if char.isascii() else (other, char)
            if plain.isprintable() and not plain.isspace():
                targets.setdefault(look_alike, set()).add(plain.lower())
    return {char: min(found) for char, found in targets.items() if len(found) == 1}


@lru_cache(maxsize=4096)
def _fold_lookalike_char(char: str) -> str:
    pieces: list[str] = []
    for piece in _fold_char(char):
        if piece.isascii():
            pieces.append(piece)
        elif unicodedata.decimal(piece, None) is not None:
            pieces.append(str(unicodedata.decimal(piece)))
        else:
            pieces.append(_look_alikes().get(piece, piece))
    return "".join(pieces)


def fold_lookalikes(text: str) -> str:
    """:func:`fold`, then digits of every script as ASCII digits and look-alikes of printable
    ASCII characters as those characters: "ignore" written with a full-width I and a Cyrillic o
    is ``"ignore"``."""
    if text.isascii():
        return text.lower()
    return "".join(map(_fold_lookalike_char, text))


def fold_lookalikes_with_positions(text: str) -> tuple[str, list[int]]:
    """``fold_lookalikes(text)`` and, for each of its characters, the index in ``text`` it came
    from."""
    return _with_positions(text, _fold_lookalike_char)


def _with_positions(text: str, fold_char: Callable[[str], str]) -> tuple[str, list[int]]:
    pieces = list(map(fold_char, text))
    folded = "".join(pieces)
    if len(folded) == len(text) and all(pieces):
        # Each character became one: the common case, without a loop in Python.
        return folded, list(range(len(text)))
    origins: list[int] = []
    for index, piece in enumerate(pieces):
        origins.extend([index] * len(piece))
    return folded, origins


def words(text: str) -> list[str]:
    """The folded words of ``text`` (runs of ASCII letters and digits), in order."""
    return _WORD.findall(fold(text))


def is_significant(word: str) -> bool:
    """Whether a folded word takes part in matching: single letters do not (in questions and chat
    they are variables, ``x + 3``, or particles, ``ạ``, and would match any text with an ``a``)."""
    return len(word) > 1 or word.isdigit()
