"""The shapes of identifiers learner-facing text may never hold, one readable table.

The platform's keys follow ``nemo_core.identifiers``: 8 to 128 letters, digits or ``. _ : -``,
with at least one letter and one digit. That rule alone cannot be the check: ordinary teaching
text is full of tokens that fit it (a product code ``SP-2024-000123``, a course code
``TOAN8-HK1``, a model ``X200-2025``). So a text is refused for the shapes the platform's keys
actually take (:data:`SHAPES`), each match also fitting the key rule where the shape is a key:

- the demo keys ``<kind>-<school>-<serial>``: a kind letter (``L`` learner, ``U`` user, ``F``
  family...), a four-digit school, a serial of letters and digits (``L-2041-1``, ``U-2041-P1``);
- UUIDs, with or without their hyphens;
- prefixed random ids (``usr_8f3a2b9c1d4e5f60``) and random ids of at least 16 letters and
  digits mixed;

besides a learner's pseudonym (``nemo_`` and hex, glued to a word or not) and a model provider's
key. A key is found as a whole token, as ``nemo_core.identifiers`` finds mentions: no letter or
digit right before or after it, so ``SP-2024-000123`` holds no ``P-2024-000123``. The patterns
read folded text (:func:`nemo_core.text.fold_lookalikes`: lower case, look-alike and full-width
characters and dashes read as ASCII), so every spelling of a key is its folded spelling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from nemo_core.identifiers import MAX_KEY_CHARS, MIN_KEY_CHARS

_BEFORE: Final = r"(?<![^\W_])"
_AFTER: Final = r"(?![^\W_])"
"""Neither a letter nor a digit on that side (``nemo_core.identifiers``' mention boundary)."""
_MIXED: Final = r"(?=[a-z]*[0-9])(?=[0-9]*[a-z])"
"""At least one letter and one digit in the run of letters and digits that follows."""


@dataclass(frozen=True, slots=True)
class Shape:
    """One shape of identifier, as it reads in folded text."""

    name: str
    pattern: str
    example: str
    key: bool
    """Whether it is a shape of the platform's keys: every match fits ``nemo_core``'s key rule
    (a test holds each such shape to it)."""
    in_token: bool = True
    """Whether a match is a run of key characters (letters, digits, ``. _ : -``) of at least
    ``MIN_KEY_CHARS``: such shapes are looked for only in those runs."""


SHAPES: Final = (
    Shape(
        "pseudonym",
        r"nem[o0][\W_]{0,3}[0-9a-f]{6,}",
        "nemo_3fa2c4d5e6f7",
        key=False,
        in_token=False,
    ),
    Shape(
        "demo key",
        rf"{_BEFORE}[a-z]-[0-9]{{4}}-[a-z0-9]{{1,{MAX_KEY_CHARS - 7}}}{_AFTER}",
        "U-2041-P1",
        key=True,
    ),
    Shape(
        "uuid",
        rf"{_BEFORE}[0-9a-f]{{8}}(?:-?[0-9a-f]{{4}}){{3}}-?[0-9a-f]{{12}}{_AFTER}",
        "0f8fad5b-d9cb-469f-a165-70867728950e",
        key=False,
    ),
    Shape(
        "prefixed random id",
        rf"{_BEFORE}[a-z]{{2,12}}[_-]{_MIXED}[a-z0-9]{{12,{MAX_KEY_CHARS - 13}}}{_AFTER}",
        "usr_8f3a2b9c1d4e5f60",
        key=True,
    ),
    Shape(
        "random id",
        rf"{_BEFORE}{_MIXED}[a-z0-9]{{16,{MAX_KEY_CHARS}}}{_AFTER}",
        "01hzx3k9m2q7r8s5t6v4w0y1z2",
        key=True,
    ),
    Shape(
        "provider key", r"\b(?:sk|nvapi|xai|gsk)[-_][a-z0-9_-]{16,}", "sk-" + "a1" * 8, key=False
    ),
)

_SPREAD: Final = re.compile("|".join(shape.pattern for shape in SHAPES if not shape.in_token))
_IN_TOKEN: Final = re.compile("|".join(shape.pattern for shape in SHAPES if shape.in_token))
_TOKEN: Final = re.compile(rf"[a-z0-9][a-z0-9._:-]{{{MIN_KEY_CHARS - 1},}}")
"""A run of key characters as long as the shortest key: few words of ordinary text are."""


def holds_identifier(folded: str) -> bool:
    """Whether folded text holds any of :data:`SHAPES`."""
    if _SPREAD.search(folded):
        return True
    return any(
        _IN_TOKEN.search(folded, token.start(), token.end()) for token in _TOKEN.finditer(folded)
    )
