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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Final, Protocol, cast

from nemo_context.gate.rules import ORDINARY_PAIRS, PERSON_WORDS, SCHOOL_WORDS
from nemo_context.gate.shapes import Span, dates
from nemo_context.gate.tokens import Token

FINGERPRINT_BYTES: Final = 16
_DIGIT_RUN: Final = re.compile(r"\d(?:[ _.\-()/+]{0,3}\d){7,}")
#: Lengths of a phone number as stored: a national number without its trunk prefix (Vietnam: 9
#: for mobiles, 9 or 10 for landlines; elsewhere up to 12), or a number abroad with its country
#: code, which the store keeps (E.164: at most 15 digits).
_PHONE_LENGTHS: Final = range(8, 16)
#: Most characters between two words of one name, address or school ("Trần  Bảo", "Trần - Bảo").
_NEAR: Final = 3
#: Most letters of one word of the circle read out of a word written letter by letter.
_LONGEST_PIECE: Final = 32
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

    @cached_property
    def _findable(self) -> frozenset[str]:
        """Every word a name, an e-mail address, an address or a school is found by."""
        return self._worded | self.joined_names | {fp for email in self.emails for fp in email}

    @cached_property
    def _named_by(self) -> frozenset[str]:
        """The given names and the names written as one word: every name found holds one."""
        return self.joined_names | {name[-1] for name in self.names}

    @cached_property
    def _phrases(self) -> tuple[tuple[str, ...], ...]:
        """The e-mail addresses, addresses and schools: each found only with all its words."""
        return (*self.emails, *self.addresses, *self.schools)

    @cached_property
    def identity(self) -> bytes:
        """A digest of everything the circle matches with (its key and fingerprints): two circles
        with one identity find the same identifiers, so a verdict remembered for one holds for
        the other (see :mod:`.reading`); a circle that changed has another identity."""
        fields = (
            self.key,
            self.names,
            sorted(self.joined_names),
            self.emails,
            self.addresses,
            self.schools,
            sorted(self.phones),
            sorted(self.birth_dates),
            sorted(self.accented),
        )
        return hashlib.sha256(repr(fields).encode()).digest()

    @property
    def empty(self) -> bool:
        """Whether there is nothing to look for."""
        return not (
            self.names or self.emails or self.addresses or self.schools or self.phones
        ) and not (self.birth_dates or self.joined_names)

    def spans(self, text: ReadText) -> list[Span]:
        """Where the circle's identifiers are in ``text.plain``."""
        if self.empty:
            return []
        return [
            *self._word_spans(text),
            *self._phones(text.plain),
            *self._birth_dates(text.plain),
        ]

    def finds(self, text: ReadText) -> bool:
        """Whether ``text`` holds an identifier of the circle (``spans`` says where): settled by
        its dates, digit runs and distinct words, and read word by word only when its words hold
        what a match needs (a given name, every word of an e-mail, an address or a school)."""
        if self.empty:
            return False
        if self.birth_dates and not self.birth_dates.isdisjoint(self._prints_of(text.dates)):
            return True
        if text.digit_runs and any(self._phone(digits) for digits in text.digit_runs):
            return True
        if text.spaced:
            # Words written letter by letter are read with the circle's words (_pieces).
            return next(self._word_spans(text), None) is not None
        present = self._present(text)
        if present.isdisjoint(self._named_by) and not any(
            present.issuperset(phrase) for phrase in self._phrases
        ):
            return False
        return next(self._word_spans(text), None) is not None

    def _present(self, text: ReadText) -> set[str]:
        """The fingerprints of the distinct words of ``text``, but for the circle's words that
        are written only with other diacritics than the circle's."""
        words = list(text.words)
        prints = self._prints_of(words)
        present = set(prints)
        suspects = present.intersection(self._worded) if self.accented else ()
        if suspects:
            word_of = dict(zip(prints, words, strict=True))
            for fp in suspects:
                places = text.places(word_of[fp])
                if all(self._rejected(text.written(start, end)) for start, end in places):
                    present.discard(fp)
        return present

    def _prints_of(self, words: Sequence[str]) -> list[str]:
        """The fingerprints of ``words``, in order."""
        known = _PRINTS.get(self.key) or {}
        found = list(map(known.get, words))
        if None not in found:
            return cast(list[str], found)
        return [fp or fingerprint(self.key, word) for fp, word in zip(found, words, strict=True)]

    def _rejected(self, written: str) -> bool:
        """Whether a word of the circle, as ``written``, carries other diacritics than the
        circle's words carry."""
        return not written.isascii() and fingerprint(self.key, written) not in self.accented

    def _word_spans(self, text: ReadText) -> Iterator[Span]:
        """Names, e-mail addresses, addresses and schools: what is found by its words (read
        again with the words written letter by letter read whole, when there are any)."""
        folded = text.plain
        for words in (text.tokens, *((self._with_pieces(text),) if text.spaced else ())):
            prints = self._prints_of([word for word, _, _ in words])
            if self.accented:
                self._reject_other_diacritics(text, words, prints)
            present = set(prints)
            yield from self._names(text, words, prints, present)
            for kind, phrases in (("email", self.emails), ("address", self.addresses)):
                yield from _phrases(folded, words, prints, phrases, kind, present)
            yield from self._schools(folded, words, prints, present)

    def _with_pieces(self, text: ReadText) -> list[Token]:
        """The words of ``text`` with each word written letter by letter read as the circle's
        words it is made of (:meth:`_pieces`) instead of one letter at a time."""
        spaced = text.spaced
        kept = [word for word in text.tokens if not any(s <= word[1] < e for _, s, e in spaced)]
        pieces = [piece for letters, start, _ in spaced for piece in self._pieces(letters, start)]
        return sorted([*kept, *pieces], key=lambda word: word[1])

    def _pieces(self, letters: str, start: int) -> Iterator[Token]:
        """The circle's words ``letters`` are made of, the longest first from the left, and its
        other letters one by one (``start``: where the first letter is written; the others
        follow two characters apart). "khoaa" is "khoa" and "a" ("K h o a ạ"); "tranbaongoc" is
        a name run together."""
        first = 0
        while first < len(letters):
            end = first + 1
            for longer in range(min(len(letters), first + _LONGEST_PIECE), first + 1, -1):
                if fingerprint(self.key, letters[first:longer]) in self._findable:
                    end = longer
                    break
            yield letters[first:end], start + 2 * first, start + 2 * end - 1
            first = end

    def _reject_other_diacritics(
        self, text: ReadText, words: list[tuple[str, int, int]], prints: list[str]
    ) -> None:
        """Forget the words of the circle written with other diacritics than the circle's."""
        for index, fp in enumerate(prints):
            if fp in self._worded and self._rejected(text.written(*words[index][1:])):
                prints[index] = ""

    def _names(
        self,
        text: ReadText,
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
                    and _near(text.plain, words[end - 1], words[end])
                ):
                    seen.add(prints[end])
                    end += 1
                if given in seen and (len(seen) >= 2 or _after_person_word(text, words, index)):
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

    def _phone(self, digits: str) -> bool:
        """Whether a national number of the circle is written in ``digits``."""
        return bool(self.phones) and any(
            fingerprint(self.key, digits[start : start + length]) in self.phones
            for length in _PHONE_LENGTHS
            for start in range(len(digits) - length + 1)
        )

    def _phones(self, folded: str) -> Iterable[Span]:
        for start, end, digits in digit_runs(folded):
            if self._phone(digits):
                yield start, end, "phone"

    def _birth_dates(self, folded: str) -> Iterable[Span]:
        if not self.birth_dates:
            return
        for start, end, day in dates(folded):
            if fingerprint(self.key, day) in self.birth_dates:
                yield start, end, "birth_date"


class ReadText(Protocol):
    """A text as :meth:`Circle.finds` reads it (see :class:`.reading.Reading`)."""

    @property
    def text(self) -> str: ...
    @property
    def plain(self) -> str: ...
    @property
    def words(self) -> frozenset[str]: ...
    @property
    def dates(self) -> tuple[str, ...]: ...
    @property
    def digit_runs(self) -> tuple[str, ...]: ...
    @property
    def tokens(self) -> list[Token]: ...
    @property
    def spaced(self) -> list[Token]: ...
    def places(self, word: str) -> list[tuple[int, int]]:
        """Where ``word`` stands in ``plain``."""

    def written(self, start: int, end: int) -> str:
        """``plain[start:end]`` as written: diacritics kept (:func:`.tokens.soft_fold`)."""


def digit_runs(folded: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, digits)`` of every run of digits in ``folded`` long enough to hold a phone
    number, however its digits are grouped and separated."""
    for run in _DIGIT_RUN.finditer(folded):
        yield run.start(), run.end(), "".join(char for char in run.group() if char.isdigit())


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


def _after_person_word(text: ReadText, words: list[tuple[str, int, int]], index: int) -> bool:
    """Whether the word before ``words[index]``, as written (with its diacritics), is a word for a
    person and the two are not an ordinary word together ("anh hùng" is a hero)."""
    if index == 0 or not _near(text.plain, words[index - 1], words[index]):
        return False
    before, name = (text.written(start, end) for _, start, end in (words[index - 1], words[index]))
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
