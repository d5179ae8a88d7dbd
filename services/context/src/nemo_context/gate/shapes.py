"""Contact data of anyone, found by its shape: e-mail addresses, phone numbers, Vietnamese and
English street addresses, and a date next to a birth word.

Every function here reads text folded by :func:`.tokens.fold_plain` (plain lower-case Latin, no
diacritics), so full-width letters and digits and ``Phường`` are read as ASCII letters, digits
and ``phuong``, and returns ``(start, end, kind)`` spans of that folded text. Phone numbers are
Google's libphonenumber rules (the ``phonenumbers`` package), Vietnam first, so every national
and international format of a valid number is found; a run of digits that is no valid number
(a product code, a formula's result) is not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Final

import phonenumbers

from nemo_context.gate.rules import BIRTH_WORDS

Span = tuple[int, int, str]

_DIGIT: Final = re.compile(r"\d")
"""Dates, addresses and birth dates all hold a digit: text without one holds none of them."""

_EMAIL: Final = re.compile(
    r"[a-z0-9][a-z0-9._%+-]*\s*(?:@|\(at\)|\[at\])\s*[a-z0-9-]+(?:\s*(?:\.|\(dot\)|\[dot\])\s*[a-z0-9-]+)+"
)
_DIGIT_RUN: Final = re.compile(
    r"(?=[+(0-9])(?<![a-z0-9])(?<![a-z0-9]-)\+?\(?\d(?:[ _.\-()/]{0,3}\d){7,}(?![a-z0-9])"
)
"""Eight digits or more, written with the separators phone numbers are written with, not inside
a code (``SP-2024-0001``) or a longer token (a hex digest starting ``0796081998e2``, about one
in three thousand SHA-256 digests): the only text worth handing to the phone number matcher. Each
pattern here that cannot start just anywhere first looks ahead at the characters it can start
with: checked first, that one test rules out most positions of a text."""
_SLASH_DATE: Final = re.compile(
    r"(?<!\d)(?:[0-3]?\d/[01]?\d|[01]?\d/[0-3]?\d)/(?:[12]\d)?\d{2}(?!\d)"
)
"""A date written with slashes. libphonenumber drops a whole candidate that holds one, so a phone
number written beside a date ("12/3/2015 0912 345 678") would be missed: dates are blanked out
of a run before it is read."""
_GROUPED_START: Final = re.compile(r"(?<![^ ])(?:0|\(?\+84\)?|84)[ .\-]{0,3}[2-9]")
_GROUPED_REST: Final = (
    re.compile(r"(?:[ .\-]{0,3}\d){9}(?!\d)"),
    re.compile(r"(?:[ .\-]{0,3}\d){8}(?!\d)"),
)
"""A phone number written in groups beside another number ("lớp 2015 0912 345 678", "+84 912
345 678 2000-01-01"): nine or ten digits after ``0`` or ``+84``, the first 2 to 9 as in every
Vietnamese number. libphonenumber reads a run of
digits as one candidate and finds a number inside it only when that number is one group, so
these are checked on their own."""
_DIALLED: Final = re.compile(r"[(]?(?:\+|0|84\D*[1-9](?:\D*\d){8,9}$)")
"""How a phone number is written: with its country code (``+84``, ``0084``, Vietnam's ``84``
without a plus) or its trunk prefix (``0``). Nine bare digits are a number, a count or a code,
not a phone number."""

_GAP: Final = r"[ \t_.\-]+"
"""Between two words of one line: spaces, or the separators a person puts in their place."""
_HOUSE: Final = r"\d{1,4}[a-z]?(?:/\d{1,4}[a-z]?)*"
_LANE: Final = rf"(?:(?:ngo|ngach|hem|kiet){_GAP}{_HOUSE}{_GAP})*"
_ADMIN: Final = (
    rf"(?<![a-z])(?:phuong|quan|huyen|xa|thi{_GAP}tran|tp|thanh{_GAP}pho|tinh|p\.|q\.|ward"
    r"|district)"
)
_WORDS: Final = rf"[a-z]+(?:{_GAP}[a-z]+){{0,4}}"
_NUMBERED: Final = rf"(?:so{_GAP}(?:nha{_GAP})?)"
_ADDRESS: Final = re.compile(
    # A house number, lanes, maybe a street word, one to five words of the street's name, then a
    # ward, district or town.
    rf"\b{_NUMBERED}?{_HOUSE}{_GAP}{_LANE}(?:(?:duong|pho){_GAP})?{_WORDS}"
    rf"[ \t_.,\-]*{_ADMIN}(?![a-z])[^\n\x00,;]{{0,24}}"
    # "12 ngõ 45 Trần Duy Hưng": a house number in a lane.
    rf"|\b{_NUMBERED}?{_HOUSE}{_GAP}(?:(?:ngo|ngach|hem|kiet){_GAP}{_HOUSE}{_GAP})+{_WORDS}"
    # "số 12 đường Lê Lợi": a house number written as such, then a street word.
    rf"|\b{_NUMBERED}{_HOUSE}{_GAP}(?:duong|pho){_GAP}{_WORDS}"
    # "221B Baker Street".
    rf"|\b\d{{1,5}}[a-z]?{_GAP}(?:[a-z]+{_GAP}){{1,3}}"
    r"(?:street|road|avenue|lane|boulevard)\b"
)

_ADDRESS_START: Final = re.compile(
    # Every form has a house number (up to five digits, maybe a letter and slashes) and a gap.
    rf"(?=[s0-9])\b(?:so{_GAP}(?:nha{_GAP})?)?\d(?=\d{{0,4}}[a-z]?(?:/\d{{1,4}}[a-z]?)*[ \t_.\-])"
)

_MONTHS: Final = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}  # fmt: skip
_MONTH: Final = "|".join(sorted(_MONTHS, key=len, reverse=True))
_SEP: Final = r"(?:[ \t]*[/.\-_][ \t]*|[ \t]+)"
_DATE_START: Final = "".join(sorted({name[0] for name in _MONTHS}))
_DATE: Final = re.compile(
    # Every date starts with a digit or a month's name.
    rf"(?=[0-9{_DATE_START}])\b(?:"
    rf"(?P<d1>\d{{1,2}}){_SEP}(?P<m1>\d{{1,2}}){_SEP}(?P<y1>\d{{4}}|\d{{2}})\b"
    rf"|(?P<y2>\d{{4}}){_SEP}(?P<m2>\d{{1,2}}){_SEP}(?P<d2>\d{{1,2}})\b"
    rf"|(?P<d3>\d{{1,2}}){_GAP}thang{_GAP}(?P<m3>\d{{1,2}})"
    rf"[ \t_.,\-]*(?:nam{_GAP})?(?P<y3>\d{{4}})\b"
    rf"|(?P<mn4>{_MONTH})\.?{_GAP}(?P<d4>\d{{1,2}})(?:st|nd|rd|th)?"
    rf"[ \t_.,\-]+(?P<y4>\d{{4}})\b"
    rf"|(?P<d5>\d{{1,2}})(?:st|nd|rd|th)?{_GAP}(?:of{_GAP})?(?P<mn5>{_MONTH})\.?"
    rf"[ \t_.,\-]+(?P<y5>\d{{4}})\b"
    r")"
)
_YEAR: Final = re.compile(r"\b(?:19|20)\d{2}\b")
_BIRTH_WORD: Final = re.compile(
    # Longest first; "học sinh" (a pupil) and "sinh học" (biology) are no birth words.
    f"(?=[{''.join(sorted({word[0] for word in BIRTH_WORDS}))}])"
    r"(?<!hoc )\b(?:"
    + "|".join(
        re.escape(word).replace(r"\ ", r"\s+")
        for word in sorted(BIRTH_WORDS, key=len, reverse=True)
    )
    + r")\b(?!\s+hoc\b)"
)
#: How far after a birth word its date may start ("sinh ngày 2/5", "born on the 2nd of May").
_BIRTH_REACH: Final = 24
_LINE_END: Final = re.compile(r"[\n\x00]|[.;!?](?:\s|$)")


def _year(text: str) -> int:
    year = int(text)
    if len(text) == 2:
        year += 2000 if year <= datetime.now(UTC).year % 100 else 1900
    return year


def dates(folded: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, YYYY-MM-DD)`` of every calendar date written in ``folded``."""
    if _DIGIT.search(folded) is None:
        return
    for match in _DATE.finditer(folded):
        groups = match.groupdict()
        for n in "12345":
            year = groups.get(f"y{n}")
            if year is None:
                continue
            month_name = groups.get(f"mn{n}")
            month = _MONTHS[month_name] if month_name else int(groups[f"m{n}"] or 0)
            try:
                day = date(_year(year), month, int(groups[f"d{n}"] or 0))
            except ValueError:
                break
            yield match.start(), match.end(), day.isoformat()
            break


def emails(folded: str) -> Iterator[Span]:
    """E-mail addresses, also written with ``(at)`` and ``(dot)``."""
    if "@" not in folded and "(at)" not in folded and "[at]" not in folded:
        return
    for match in _EMAIL.finditer(folded):
        yield match.start(), match.end(), "email"


_UUID: Final = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}")
"""A UUID, whose hyphen-separated digit groups read like a phone number written with dashes."""


def _blank(match: re.Match[str]) -> str:
    return " " * len(match.group())


def _grouped_numbers(candidate: str) -> Iterator[tuple[int, int]]:
    end = 0
    for start in _GROUPED_START.finditer(candidate):
        if start.start() < end:
            continue
        for rest in _GROUPED_REST:
            digits = rest.match(candidate, start.end())
            if digits is not None and _valid_number(candidate[start.start() : digits.end()]):
                end = digits.end()
                yield start.start(), end
                break


def _valid_number(written: str) -> bool:
    digits = "".join(char for char in written if char.isdigit())
    dialled = digits if digits.startswith("0") else f"+{digits}"
    return phonenumbers.is_valid_number(phonenumbers.parse(dialled, "VN"))


def phones(folded: str) -> Iterator[Span]:
    """Valid phone numbers in any national or international format (Vietnam first)."""
    uuids: list[tuple[int, int]] | None = None  # found once, and only for a text with a run
    for run in _DIGIT_RUN.finditer(folded):
        if uuids is None:
            uuids = [match.span() for match in _UUID.finditer(folded)]
        if any(start <= run.start() < end for start, end in uuids):
            continue
        candidate = _SLASH_DATE.sub(_blank, run.group().replace("_", " "))
        found = [
            (match.start, match.end)
            for match in phonenumbers.PhoneNumberMatcher(
                candidate, "VN", leniency=phonenumbers.Leniency.VALID
            )
            if _DIALLED.match(match.raw_string)
        ]
        found += [
            (grouped_start, grouped_end)
            for grouped_start, grouped_end in _grouped_numbers(candidate)
            if not any(start < grouped_end and grouped_start < end for start, end in found)
        ]
        for start, end in sorted(found):
            yield run.start() + start, run.start() + end, "phone"


def addresses(folded: str) -> Iterator[Span]:
    """Street addresses: a house number, a street, and a ward or district (or a street word)."""
    if _DIGIT.search(folded) is None:
        return
    end = 0
    # Tried only where a house number (maybe "số nhà" first) starts, not at every character.
    for start in _ADDRESS_START.finditer(folded):
        if start.start() < end:
            continue
        match = _ADDRESS.match(folded, start.start())
        if match is not None:
            end = match.end()
            yield match.start(), end, "address"


def birth_dates(folded: str) -> Iterator[Span]:
    """A date (or a year) written shortly after a birth word: "sinh ngày 2/5/2014", "DOB:
    2014-05-02", "born in 2014"."""
    if _DIGIT.search(folded) is None:
        return
    for word in _BIRTH_WORD.finditer(folded):
        window = folded[word.end() : word.end() + _BIRTH_REACH]
        line_end = _LINE_END.search(window)
        window = window[: line_end.start()] if line_end else window
        found = next(dates(window), None)
        if found is not None:
            start, end, _ = found
        else:
            year = _YEAR.search(window) if BIRTH_WORDS[" ".join(word.group().split())] else None
            if year is None:
                continue
            start, end = year.span()
        yield word.end() + start, word.end() + end, "birth_date"


def shapes(folded: str) -> list[Span]:
    """Every contact shape in ``folded``."""
    return [*emails(folded), *phones(folded), *addresses(folded), *birth_dates(folded)]
