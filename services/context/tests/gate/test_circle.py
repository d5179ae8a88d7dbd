"""The circle's own rules, at their edges: fingerprints as the database makes them, what a circle
built from the function's rows keeps, how close a name's words must stand, how long a phone
number may be, and that a circle never shows its key.

The people are this file's own; each identifier is written in a form only the circle finds.
"""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_context.gate import circle as circle_module
from nemo_context.gate.circle import Circle, fingerprint
from nemo_context.gate.identifiers import identifier_kind
from nemo_context.gate.reading import Reading

from .circles import KEY, Person, circle_of
from .spellings import PROPERTY

# What the migration computes: substr(hmac_sha256(key, token), 1, 16), in hex.
_DATABASE_BYTES = 16

WORDS = st.text(alphabet="abcdefghiklmnopqrstuvxy0123456789", min_size=1, max_size=12)


@PROPERTY
@given(word=WORDS)
def test_a_fingerprint_is_the_databases(word: str) -> None:
    expected = hmac.new(KEY, word.encode(), hashlib.sha256).digest()[:_DATABASE_BYTES].hex()
    assert fingerprint(KEY, word) == expected


def _found(circle: Circle, text: str) -> str | None:
    return identifier_kind(Reading(text), circle)


def test_the_fingerprints_kept_for_a_key_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    key = b"a key for this test only"
    monkeypatch.setattr(circle_module, "_MAX_PRINTS", 3)
    monkeypatch.setitem(circle_module._PRINTS, key, {})
    words = [f"tu{index}" for index in range(7)]
    prints = [fingerprint(key, word) for word in words]
    assert 0 < len(circle_module._PRINTS[key]) <= 3
    assert prints == [
        hmac.new(key, word.encode(), hashlib.sha256).digest()[:_DATABASE_BYTES].hex()
        for word in words
    ]


GIVEN = st.sampled_from(["Khôi", "Tuấn", "Hằng", "Phúc", "Quỳnh"])
MIDDLE = st.sampled_from(["Quốc", "Hữu", "Đình", "Xuân"])


@PROPERTY
@given(middle=MIDDLE, given_name=GIVEN, near=st.sampled_from([" ", "  ", " - ", "_", ". "]))
def test_two_words_of_a_name_are_one_name_only_written_close(
    middle: str, given_name: str, near: str
) -> None:
    circle = circle_of([Person(f"Phan {middle} {given_name}")])
    assert _found(circle, f"gặp {middle}{near}{given_name} nhé") == "name"
    # Four separators or more, or a comma, a colon or a line between them: two words apart.
    for apart in ("    ", " -  ", ", ", ": ", "\n"):
        assert _found(circle, f"gặp {middle}{apart}{given_name} nhé") is None, apart


NATIONAL = st.integers(8, 12).flatmap(
    lambda size: st.from_regex(rf"[1-9][0-9]{{{size - 1}}}", fullmatch=True)
)


@PROPERTY
@given(national=NATIONAL, group=st.integers(2, 4))
def test_a_phone_of_eight_to_twelve_national_digits_is_found_however_grouped(
    national: str, group: int
) -> None:
    circle = circle_of([Person("Phan Quốc Khôi", phone=f"0{national}")])
    grouped = " ".join(national[i : i + group] for i in range(0, len(national), group))
    assert _found(circle, f"số {grouped} nhé") == "phone"


ABROAD = st.sampled_from(["1", "7", "44", "49", "86", "852", "886", "971"]).flatmap(
    lambda country: st.integers(8, 15 - len(country)).flatmap(
        lambda size: st.from_regex(rf"[1-9][0-9]{{{size - 1}}}", fullmatch=True).map(
            lambda national: (country, national)
        )
    )
)


@PROPERTY
@given(number=ABROAD, group=st.integers(2, 4), plus=st.sampled_from(["+", "00", ""]))
def test_a_phone_abroad_is_found_with_its_country_code_however_grouped(
    number: tuple[str, str], group: int, plus: str
) -> None:
    """A number outside Vietnam is stored with its country code, up to the 15 digits E.164
    allows, and is found written with or without the code's "+" or "00"."""
    country, national = number
    circle = circle_of([Person("Phan Quốc Khôi", phone=f"+{country} {national}")])
    grouped = " ".join(national[i : i + group] for i in range(0, len(national), group))
    assert _found(circle, f"số {plus}{country} {grouped} nhé") == "phone"


@PROPERTY
@given(
    local=st.tuples(GIVEN, st.sampled_from(["phan", "vo", "ly"])),
    house=st.integers(1, 99),
    street=st.sampled_from(["Láng", "Kim", "Huế"]),
)
def test_two_words_are_enough_for_an_email_or_an_address(
    local: tuple[str, str], house: int, street: str
) -> None:
    name, family = local
    person = Person(
        "Phan Quốc Khôi", email=f"{name}.{family}@example.org", address=f"{house} {street}, Hà Nội"
    )
    circle = circle_of([person])
    assert _found(circle, f"tài khoản {name}.{family} nhé") == "email"
    assert _found(circle, f"gặp ở {house} {street} nhé") == "address"


@PROPERTY
@given(core=st.sampled_from(["Marie Curie", "Ngô Sĩ Liên", "Amsterdam"]))
def test_a_school_stored_with_or_without_its_kind_is_found_after_a_school_word(core: str) -> None:
    for stored in (core, f"Trường THCS {core}", f"THPT chuyên {core}"):
        circle = circle_of([Person("Phan Quốc Khôi", school=stored)])
        assert _found(circle, f"em học trường {core}") == "school", stored
        assert _found(circle, f"em đọc về {core}") is None, stored


def test_a_school_named_only_by_its_kind_finds_nothing() -> None:
    for stored in ("Trường THCS", "Trường", "THPT chuyên"):
        circle = circle_of([Person("Phan Quốc Khôi", school=stored)])
        assert _found(circle, f"em học {stored} gần nhà") is None, stored
        assert _found(circle, "Phan Quốc Khôi học bài") == "name"


def test_a_circle_never_shows_its_key() -> None:
    circle = circle_of([Person("Phan Quốc Khôi")])
    assert KEY.decode() not in repr(circle)
    assert repr(KEY) not in repr(circle)
