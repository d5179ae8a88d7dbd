"""The literal text every match of a regular expression contains: a cheap test before a scan.

Scanning a text with a large alternation costs Python's engine every alternative at every
position, whatever the text. :func:`necessary_literals` reads a pattern's syntax tree (Python's
own parser) and finds strings of which every match contains at least one; a text that contains
none of them cannot match, so :class:`LiteralFilter` lets the caller skip the scan. A text that
contains one is scanned as before: the answer is the same either way, only cheaper for the texts
that hold none of the words a pattern needs.

The reading is conservative. A part that can match only a few strings is *exact* (a letter, a
small set of letters, an alternation or optional group of exact parts; anchors and lookarounds
match the empty string); consecutive exact parts combine, so ``(?:cho|gui) (?:ai|tro ly)`` needs
one of ``cho ai``, ``cho tro ly``, ``gui ai``, ``gui tro ly``. Any other part (``.``, a class of
many characters, a repeat that may run more than once) breaks the run; it needs what its content
needs when it must match at least once, else nothing. An alternation needs one of what its
branches need, and nothing when one branch needs nothing. Of the runs and parts of a sequence,
the one whose shortest literal is longest is kept. A pattern that ignores case (or matches by
locale) needs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

Literals = frozenset[str]

#: The most strings an exact part may stand for: beyond it, a run is closed.
EXACT_LIMIT = 8
#: The largest character class read as a set of letters.
CLASS_LIMIT = 8
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}
_ZERO_WIDTH = {sre.AT, sre.ASSERT, sre.ASSERT_NOT}
_CASE_FLAGS = re.IGNORECASE | re.LOCALE
_EMPTY: Literals = frozenset({""})


@dataclass(frozen=True)
class _Reading:
    """What a part of a pattern can match: every string, when they are few (``exact``), and
    strings one of which any match contains (``needed``)."""

    exact: Literals | None
    needed: Literals | None


_NOTHING = _Reading(None, None)


def necessary_literals(pattern: str) -> Literals | None:
    """Strings one of which every match of ``pattern`` contains; None when a match may contain
    no fixed text at all (or the pattern ignores case)."""
    parsed = sre_parse.parse(pattern)
    if parsed.state.flags & _CASE_FLAGS:
        return None
    return _sequence(parsed).needed


def _strength(literals: Literals) -> tuple[int, int]:
    # The longest shortest literal filters best; of equal ones, the fewer alternatives.
    return min(map(len, literals)), -len(literals)


def _usable(literals: Literals | None) -> bool:
    # A set holding the empty string says nothing: every text contains it.
    return literals is not None and bool(literals) and "" not in literals


def _sequence(items: Sequence[tuple[Any, Any]]) -> _Reading:
    candidates: list[Literals] = []
    run = _EMPTY
    all_exact = True
    for op, argument in items:
        reading = _item(op, argument)
        if reading.exact is not None and len(run) * len(reading.exact) <= EXACT_LIMIT:
            run = frozenset(left + right for left in run for right in reading.exact)
            continue
        all_exact = False
        candidates.append(run)
        run = reading.exact if reading.exact is not None else _EMPTY
        if reading.needed is not None:
            candidates.append(reading.needed)
    candidates.append(run)
    needed = max(filter(_usable, candidates), key=_strength, default=None)
    return _Reading(run if all_exact else None, needed)


def _item(op: Any, argument: Any) -> _Reading:
    if op is sre.LITERAL:
        return _exact(frozenset({chr(argument)}))
    if op in _ZERO_WIDTH:
        return _exact(_EMPTY)
    if op is sre.IN:
        return _class(argument)
    if op is sre.SUBPATTERN:
        _, add_flags, del_flags, content = argument
        return _NOTHING if (add_flags | del_flags) & _CASE_FLAGS else _sequence(content)
    if op is sre.ATOMIC_GROUP:
        return _sequence(argument)
    if op in _REPEATS:
        return _repeat(*argument)
    if op is sre.BRANCH:
        return _branch([_sequence(branch) for branch in argument[1]])
    return _NOTHING


def _exact(strings: Literals) -> _Reading:
    return _Reading(strings, strings if _usable(strings) else None)


def _class(members: Sequence[tuple[Any, Any]]) -> _Reading:
    # Only a small class of plain letters is a set of strings; ranges, categories and negation
    # are read as anything.
    if len(members) > CLASS_LIMIT or any(op is not sre.LITERAL for op, _ in members):
        return _NOTHING
    return _exact(frozenset(chr(code) for _, code in members))


def _repeat(least: int, most: int, content: Sequence[tuple[Any, Any]]) -> _Reading:
    inner = _sequence(content)
    if most == 1 and inner.exact is not None:
        return _exact(inner.exact | _EMPTY) if least == 0 else inner
    return _Reading(None, inner.needed if least >= 1 else None)


def _branch(branches: list[_Reading]) -> _Reading:
    exacts = [branch.exact for branch in branches if branch.exact is not None]
    exact: Literals | None = None
    if len(exacts) == len(branches):
        exact = frozenset().union(*exacts)
        if len(exact) > EXACT_LIMIT:
            exact = None
    needs = [branch.needed for branch in branches if branch.needed is not None]
    needed = frozenset().union(*needs) if len(needs) == len(branches) else None
    return _Reading(exact, needed)


#: Up to this length (where the two cost the same here) a text is searched by its pairs of
#: characters, beyond it literal by literal.
_SHORT_TEXT = 32


class LiteralFilter:
    """Whether a text may match any of some patterns, from the literals they need."""

    def __init__(self, literals: Iterable[str] | None) -> None:
        #: None: some pattern needs no literal, so every text may match.
        self.literals = None if literals is None else tuple(literals)
        # Each literal under its first two characters, for short texts: a lookup per position
        # costs less than a search per literal (single characters are searched directly).
        self._by_pair: dict[str, tuple[str, ...]] = {}
        self._single: tuple[str, ...] = ()
        for literal in self.literals or ():
            if len(literal) < 2:
                self._single += (literal,)
            else:
                self._by_pair[literal[:2]] = (*self._by_pair.get(literal[:2], ()), literal)

    @classmethod
    def of(cls, patterns: Iterable[str]) -> LiteralFilter:
        needed: set[str] = set()
        for pattern in patterns:
            literals = necessary_literals(pattern)
            if literals is None:
                return cls(None)
            needed |= literals
        # A literal that holds another is found whenever that one is: keep the shorter.
        return cls(
            sorted(
                (word for word in needed if not any(o != word and o in word for o in needed)),
                key=lambda word: (len(word), word),
            )
        )

    def may_match(self, text: str) -> bool:
        """False only when no pattern can match ``text``."""
        if self.literals is None or any(literal in text for literal in self._single):
            return True
        if len(text) > _SHORT_TEXT:
            return any(literal in text for literal in self.literals)
        by_pair = self._by_pair
        for start in range(len(text) - 1):
            found = by_pair.get(text[start : start + 2])
            if found is not None and any(text.startswith(word, start) for word in found):
                return True
        return False
