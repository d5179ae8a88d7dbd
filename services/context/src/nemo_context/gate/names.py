"""Field names as words, and whether a name is forbidden (the rules are in :mod:`.rules`)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from itertools import pairwise
from typing import Final

from nemo_context.gate.rules import (
    FORBIDDEN_PHRASES,
    FORBIDDEN_WORDS,
    KEY_OWNERS,
    KEY_WORDS,
    NAME_WORDS,
    PHRASE_WORDS,
    SAFE_NAMES,
    VOCABULARY,
)
from nemo_context.gate.text import TextKey, name_spellings

# camelCase and acronym boundaries ("learnerIDs" → "learner IDs"), and letter/digit boundaries.
_BOUNDARY: Final = re.compile(
    r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2})|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])"
)
_WORD: Final = re.compile(r"[^\W_]+")
_LONGEST_WORD: Final = max(len(word) for word in VOCABULARY)
_KNOWN: Final = VOCABULARY | PHRASE_WORDS
_PHRASE_LENGTHS: Final = sorted({len(phrase) for phrase in FORBIDDEN_PHRASES})


def _split_run_together(word: str) -> list[str]:
    """``word`` split into vocabulary words (fewest pieces, the first such split on a tie), or
    ``[word]`` when it cannot be. Linear in the word's length, so no name is too long to read."""
    if word in VOCABULARY:
        return [word]
    # pieces[end]: fewest words covering word[:end] (None: not coverable); start[end]: where
    # the last of them begins.
    pieces: list[int | None] = [0] + [None] * len(word)
    start_of: list[int] = [0] * (len(word) + 1)
    for end in range(1, len(word) + 1):
        for start in range(max(0, end - _LONGEST_WORD), end):
            before = pieces[start]
            if before is not None and word[start:end] in VOCABULARY:
                current = pieces[end]
                if current is None or before + 1 < current:
                    pieces[end], start_of[end] = before + 1, start
    if pieces[len(word)] is None:
        return [word]
    split: list[str] = []
    end = len(word)
    while end:
        split.append(word[start_of[end] : end])
        end = start_of[end]
    return split[::-1]


def _without_marks(name: str) -> str:
    """``name`` without its diacritics, ``đ`` as ``d``, in its case: "họ_tên" reads "ho_ten",
    "SĐT" reads "SDT", as Vietnamese field names are written with or without them."""
    if name.isascii():
        return name
    decomposed = unicodedata.normalize("NFD", name.replace("đ", "d").replace("Đ", "D"))
    return unicodedata.normalize(
        "NFC", "".join(c for c in decomposed if not unicodedata.combining(c))
    )


def name_words(name: str) -> tuple[str, ...]:
    """The lower-case words of a field name: ``studentName``, ``student-name``, ``STUDENT_NAME``
    and ``studentname`` are all ``("student", "name")``."""
    spaced = _BOUNDARY.sub(" ", _without_marks(unicodedata.normalize("NFKC", name)))
    words: list[str] = []
    for word in _WORD.findall(spaced.casefold()):
        words.extend(_split_run_together(word))
    return tuple(words)


def _has_phrase(words: tuple[str, ...]) -> bool:
    for size in _PHRASE_LENGTHS:
        for start in range(len(words) - size + 1):
            if words[start : start + size] in FORBIDDEN_PHRASES:
                return True
    return False


@lru_cache(maxsize=8192)
def is_forbidden_name(name: str) -> bool:
    """Whether a field name (a message field, a map or JSON key, a ``key:`` in text) names
    something that must not leave the service; see :mod:`.rules`. Invisible characters and
    look-alike letters in it change nothing (:func:`.text.name_spellings`): of its spellings,
    the one made of the most vocabulary words is judged, as a reader would read it."""
    readings = [name_words(spelling) for spelling in name_spellings(name)]
    return _forbidden_words(max(readings, key=_known_words))


def is_forbidden_key(key: TextKey) -> bool:
    """Whether a key written in text is forbidden. A key of several words ("Họ tên:", "Số điện
    thoại:", "Date of birth:") counts only when every word is one of :data:`VOCABULARY`, so a
    line of prose that ends in a colon ("Write your address:") is no key."""
    if key.spaced and not all(word in _KNOWN for word in name_words(key.name)):
        return False
    return is_forbidden_name(key.name)


def _known_words(words: tuple[str, ...]) -> int:
    return sum(word in VOCABULARY for word in words)


def _forbidden_words(words: tuple[str, ...]) -> bool:
    if not words:
        return False
    if any(word in FORBIDDEN_WORDS for word in words) or _has_phrase(words):
        return True
    if any(owner in KEY_OWNERS and key in KEY_WORDS for owner, key in pairwise(words)):
        return True
    return any(word in NAME_WORDS for word in words) and "_".join(words) not in SAFE_NAMES
