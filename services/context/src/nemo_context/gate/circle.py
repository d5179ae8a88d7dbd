"""The child's circle, known by keyed fingerprints only: the learner, its siblings, their own
accounts, the family's members, guardians and mentors.

The context role cannot read names, e-mail, phone numbers, addresses, schools or birth dates.
The definer function ``learning.circle_fingerprints`` gives it, for the learner bound to its
transaction, the first 16 bytes of HMAC-SHA256(key, word) of every folded word of those values
(see ``ops/src/nemo_ops/migrations/0021_identifier_fingerprints.sql`` and ADR 0014). The gate
fingerprints the words of a text with the same key and compares. What counts as a match:

- **name**: two or more of a person's name words written next to each other, in any order, one
  of them the given name (the last word: "Bảo Ngọc", "Ngọc Trần", "TRAN BAO NGOC"), or a name
  written as one word ("tranbaongoc"); a given name alone only right after a word for a person
  (:data:`.rules.PERSON_WORDS`: "bố Hùng", "bạn Ngọc"), since alone it is often an ordinary word
  ("An", "Mai", "Nam");
- **email**: the words of an e-mail address's local part, all of them in order (two or more);
- **address**: the words of the first part of the address from the house number on, in order;
- **school**: the school's own name, in order, right after a word of a school's kind
  (:data:`.rules.SCHOOL_WORDS`: "THCS Lê Quý Đôn"), or the whole name as stored;
- **phone**: the national number's digits, however they are grouped and separated;
- **birth_date**: the date, in any format :func:`.shapes.dates` reads.

Words are compared folded (no case, no diacritics), so a name written without its diacritics is
found; a word written *with* diacritics must also carry the same ones (``accented``
fingerprints), since "Hùng", "Hưng" and "Hứng" fold to one word and only one is the father's
name.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Final

from nemo_context.gate.rules import ORDINARY_PAIRS, PERSON_WORDS, SCHOOL_WORDS
from nemo_context.gate.shapes import Span, dates
from nemo_context.gate.tokens import origins_of, soft_fold

FINGERPRINT_BYTES: Final = 16
_WORD: Final = re.compile(r"[a-z0-9]+")
_DIGIT_RUN: Final = re.compile(r"\d(?:[ _.\-()/+]{0,3}\d){7,}")
#: Lengths of a national number without its trunk prefix (Vietnam: 9 for mobiles, 9 or 10 for
#: landlines; elsewhere up to 12).
_PHONE_LENGTHS: Final = range(8, 13)
#: Most characters between two words of one name, address or school ("Trần  Bảo", "Trần - Bảo").
_NEAR: Final = 3
_JOINERS: Final = " \t-_."


_PRINTS: dict[bytes, dict[str, str]] = {}
_MAX_PRINTS: Final = 65536
"""Words fingerprinted per key, kept: the same words come back build after build."""


def fingerprint(key: bytes, word: str) -> str:
    """The fingerprint of one folded word: the first 16 bytes of HMAC-SHA256, in hex, as the
    database computes it."""
    prints = _PRINTS.get(key)
    if prints is None:
        prints = _PRINTS.setdefault(key, {})
    found = prints.get(word)
    if found is None:
        found = hmac.new(key, word.encode(), hashlib.sha256).digest()[:FINGERPRINT_BYTES].hex()
        if len(prints) >= _MAX_PRINTS:
            prints.clear()
        prints[word] = found
    return found


@dataclass(frozen=True)
class Circle:
    """The fingerprints of one learner's circle, and the key that made them."""

    key: bytes = field(repr=False)
    names: tuple[tuple[str, ...], ...] = ()
    joined_names: frozenset[str] = frozenset()
    emails: tuple[tuple[str, ...], ...] = ()
    addresses: tuple[tuple[str, ...], ...] = ()
    schools: tuple[tuple[str, ...], ...] = ()
    phones: frozenset[str] = frozenset()
    birth_dates: frozenset[str] = frozenset()
    accented: frozenset[str] = frozenset()
    """The names', addresses' and schools' words with their diacritics."""

    @classmethod
    def from_rows(cls, key: bytes, rows: Iterable[tuple[str, Sequence[str]]]) -> Circle:
        """The circle from the rows of ``learning.circle_fingerprints`` (kind, fingerprints)."""
        by_kind: dict[str, list[tuple[str, ...]]] = {}
        for kind, fingerprints in rows:
            by_kind.setdefault(kind, []).append(tuple(fingerprints))
        generic = {fingerprint(key, word) for word in SCHOOL_WORDS}
        schools = []
        for school in by_kind.get("school", []):
            start = 0
            while start < len(school) and school[start] in generic:
                start += 1
            if start < len(school):
                schools.append(school[start:])
        return cls(
            key=key,
            names=tuple(name for name in by_kind.get("name", []) if name),
            joined_names=frozenset(fp for row in by_kind.get("name_joined", []) for fp in row),
            emails=tuple(row for row in by_kind.get("email", []) if len(row) >= 2),
            addresses=tuple(row for row in by_kind.get("address", []) if len(row) >= 2),
            schools=tuple(schools),
            phones=frozenset(fp for row in by_kind.get("phone", []) for fp in row),
            birth_dates=frozenset(fp for row in by_kind.get("birth_date", []) for fp in row),
            accented=frozenset(fp for row in by_kind.get("accented", []) for fp in row),
        )

    @cached_property
    def _worded(self) -> frozenset[str]:
        """The words of the names, addresses and schools (they carry diacritics)."""
        phrases = (*self.names, *self.addresses, *self.schools)
        return frozenset(fp for phrase in phrases for fp in phrase)

    @property
    def empty(self) -> bool:
        """Whether there is nothing to look for."""
        return not (
            self.names or self.emails or self.addresses or self.schools or self.phones
        ) and not (self.birth_dates or self.joined_names)

    def spans(self, folded: str, original: str) -> list[Span]:
        """Where the circle's identifiers are in ``folded``, the :func:`.tokens.fold_plain` of
        ``original``."""
        if self.empty:
            return []
        words = [(match.group(), match.start(), match.end()) for match in _WORD.finditer(folded)]
        known = _PRINTS.get(self.key) or {}
        prints = [known.get(word) or fingerprint(self.key, word) for word, _, _ in words]
        if self.accented:
            self._reject_other_diacritics(original, words, prints)
        present = set(prints)
        found: list[Span] = []
        found.extend(self._names(folded, original, words, prints, present))
        for kind, phrases in (("email", self.emails), ("address", self.addresses)):
            found.extend(_phrases(folded, words, prints, phrases, kind, present))
        found.extend(self._schools(folded, words, prints, present))
        found.extend(self._phones(folded))
        found.extend(self._birth_dates(folded))
        return found

    def _reject_other_diacritics(
        self, original: str, words: list[tuple[str, int, int]], prints: list[str]
    ) -> None:
        """Forget the words of the circle written with other diacritics than the circle's."""
        known = self._worded
        origins: list[int] | None = None
        for index, fp in enumerate(prints):
            if fp not in known:
                continue
            origins = origins if origins is not None else origins_of(original)
            _, start, end = words[index]
            written = soft_fold(original[origins[start] : origins[end - 1] + 1])
            if not written.isascii() and fingerprint(self.key, written) not in self.accented:
                prints[index] = ""

    def _names(
        self,
        folded: str,
        original: str,
        words: list[tuple[str, int, int]],
        prints: list[str],
        present: set[str],
    ) -> Iterable[Span]:
        if not present.isdisjoint(self.joined_names):
            for index, fp in enumerate(prints):
                if fp in self.joined_names:
                    yield words[index][1], words[index][2], "name"
        for name in self.names:
            given = name[-1]
            if given not in present:
                continue  # every match holds the given name
            parts = set(name)
            index = 0
            while index < len(prints):
                if prints[index] not in parts:
                    index += 1
                    continue
                end = index + 1
                seen = {prints[index]}
                while (
                    end < len(prints)
                    and prints[end] in parts
                    and prints[end] not in seen
                    and _near(folded, words[end - 1], words[end])
                ):
                    seen.add(prints[end])
                    end += 1
                if given in seen and (
                    len(seen) >= 2 or _after_person_word(folded, original, words, index)
                ):
                    yield words[index][1], words[end - 1][2], "name"
                index = end

    def _schools(
        self,
        folded: str,
        words: list[tuple[str, int, int]],
        prints: list[str],
        present: set[str],
    ) -> Iterable[Span]:
        for school in self.schools:
            if school[0] not in present:
                continue
            for start in _occurrences(folded, words, prints, school):
                before = start - 1
                if _school_word(folded, words, before):
                    while _school_word(folded, words, before - 1):
                        before -= 1
                    yield words[before][1], words[start + len(school) - 1][2], "school"

    def _phones(self, folded: str) -> Iterable[Span]:
        if not self.phones:
            return
        for run in _DIGIT_RUN.finditer(folded):
            digits = "".join(char for char in run.group() if char.isdigit())
            if any(
                fingerprint(self.key, digits[start : start + length]) in self.phones
                for length in _PHONE_LENGTHS
                for start in range(len(digits) - length + 1)
            ):
                yield run.start(), run.end(), "phone"

    def _birth_dates(self, folded: str) -> Iterable[Span]:
        if not self.birth_dates:
            return
        for start, end, day in dates(folded):
            if fingerprint(self.key, day) in self.birth_dates:
                yield start, end, "birth_date"


def _school_word(folded: str, words: list[tuple[str, int, int]], index: int) -> bool:
    """Whether ``words[index]`` is a word of a school's kind written right before the next."""
    return (
        0 <= index < len(words) - 1
        and words[index][0] in SCHOOL_WORDS
        and _near(folded, words[index], words[index + 1])
    )


def _near(folded: str, first: tuple[str, int, int], second: tuple[str, int, int]) -> bool:
    """Whether two words are written as parts of one thing: spaces, hyphens, dots or underscores
    between them, and few (a comma, a colon or a line break ends it)."""
    gap = folded[first[2] : second[1]]
    return len(gap) <= _NEAR and not gap.strip(_JOINERS)


def _after_person_word(
    folded: str, original: str, words: list[tuple[str, int, int]], index: int
) -> bool:
    """Whether the word before ``words[index]``, as written (with its diacritics), is a word for a
    person and the two are not an ordinary word together ("anh hùng" is a hero)."""
    if index == 0 or not _near(folded, words[index - 1], words[index]):
        return False
    origins = origins_of(original)
    before, name = (
        soft_fold(original[origins[start] : origins[end - 1] + 1])
        for _, start, end in (words[index - 1], words[index])
    )
    return before in PERSON_WORDS and f"{before} {name}" not in ORDINARY_PAIRS


def _occurrences(
    folded: str, words: list[tuple[str, int, int]], prints: list[str], phrase: tuple[str, ...]
) -> Iterable[int]:
    """Where ``phrase`` (fingerprints) starts in the words, written in order and close."""
    size = len(phrase)
    for start in range(len(prints) - size + 1):
        if prints[start] != phrase[0]:
            continue
        if tuple(prints[start : start + size]) == phrase and all(
            _near(folded, words[i], words[i + 1]) for i in range(start, start + size - 1)
        ):
            yield start


def _phrases(
    folded: str,
    words: list[tuple[str, int, int]],
    prints: list[str],
    phrases: tuple[tuple[str, ...], ...],
    kind: str,
    present: set[str],
) -> Iterable[Span]:
    for phrase in phrases:
        if phrase[0] not in present:
            continue
        for start in _occurrences(folded, words, prints, phrase):
            yield words[start][1], words[start + len(phrase) - 1][2], kind
