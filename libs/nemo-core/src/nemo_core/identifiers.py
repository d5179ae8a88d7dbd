"""The keys that name learners, families and users: their format, and finding them in text.

**Format.** A key is 8 to 128 characters: ASCII letters, digits and ``. _ : -``, starting with
a letter or a digit, with at least one letter and at least one digit. A shorter or plainer key
would also be ordinary text: a learner keyed ``8`` would be found in every "lớp 8", a family
``35`` in every "35%", a user ``student`` in every sentence about students, so such keys are
refused where they are written. The demo keys follow ``<kind>-<school>-<serial>``
(``L-2041-1``); UUIDs and prefixed random ids fit as well. The database repeats the rule
(``learning.is_unambiguous_key``, migration 0013).

**Mentions.** A key is mentioned where it stands as a whole token: neither a letter nor a digit
right before or after it, in any case. ``_``, ``-`` and punctuation are boundaries, so
``L-2041-1`` is mentioned in ``X_L-2041-1``, ``(l-2041-1)`` and ``L-2041-1.``, but not in
``L-2041-10`` or ``XL-2041-1``: a leak check would rather block a result that names a key inside
a longer word than miss it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Final

MIN_KEY_CHARS: Final = 8
MAX_KEY_CHARS: Final = 128

KEY_PATTERN: Final = (
    rf"(?=[^0-9]*[0-9])(?=[^A-Za-z]*[A-Za-z])"
    rf"[A-Za-z0-9][A-Za-z0-9._:-]{{{MIN_KEY_CHARS - 1},{MAX_KEY_CHARS - 1}}}"
)
"""The format of a key, unanchored; the same syntax in Python and in JSON Schema."""

KEY_RULE: Final = (
    f"{MIN_KEY_CHARS} to {MAX_KEY_CHARS} letters, digits or . _ : - (starting with a letter or "
    "digit, with at least one letter and one digit)"
)
"""The format in words, for error messages."""

_KEY: Final = re.compile(KEY_PATTERN)

# Neither a letter nor a digit (``\w`` without ``_``) on either side.
_BEFORE: Final = r"(?<![^\W_])"
_AFTER: Final = r"(?![^\W_])"


def is_key(value: str) -> bool:
    """Whether ``value`` has the format of a learner, family or user key."""
    # fullmatch: ``$`` would also accept a trailing newline.
    return _KEY.fullmatch(value) is not None


def mention_pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern finding any of ``values`` mentioned as a whole token (see the module docstring);
    None when there is no value to find."""
    return _mention_pattern(tuple(sorted({value for value in values if value})))


@lru_cache(maxsize=1024)
def _mention_pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    if not values:
        return None
    # Longest first, so a shorter value never shadows a longer one in the alternation.
    body = "|".join(re.escape(value) for value in sorted(values, key=len, reverse=True))
    return re.compile(f"{_BEFORE}(?:{body}){_AFTER}", re.IGNORECASE)
