"""The circle's own rules, at their edges: fingerprints as the database makes them, what a circle
built from the function's rows keeps, how close a name's words must stand, how long a phone
number may be, and that a circle never shows its key.

The people are this file's own; each identifier is written in a form only the circle finds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from collections.abc import Iterator
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_context.gate import circle as circle_module
from nemo_context.gate.circle import Circle, fingerprint
from nemo_context.gate.identifiers import identifier_kind, identifier_spans
from nemo_context.gate.reading import Reading

from .circles import KEY, Person, circle_of, circle_rows
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


# A circle of one person with every kind of identifier, and a text holding each in a form only
# the circle finds.
_EVERYONE = Person(
    "Phan Quốc Khôi",
    email="khoi.phan.hs@example.org",
    phone="0912 345 678",
    address="27 Đội Cấn, Ba Đình",
    school="Trường THCS Ngô Sĩ Liên",
    birth_date=date(2013, 4, 9),
)
_ALONE = {
    "name": ("Hôm nay Phan Quốc Khôi học bài", "name"),
    "name_joined": ("tài khoản phanquockhoi nhé", "name"),
    "email": ("tài khoản khoi.phan.hs nhé", "email"),
    "phone": ("số 912345678 nhé", "phone"),
    "address": ("gặp ở 27 Đội Cấn nhé", "address"),
    "school": ("em học trường Ngô Sĩ Liên", "school"),
    "birth_date": ("hẹn ngày 9/4/2013 nhé", "birth_date"),
}


@pytest.mark.parametrize("kind", sorted(_ALONE))
def test_a_circle_of_one_kind_of_row_alone_finds_it(kind: str) -> None:
    """Whatever rows the circle holds, it looks for them: a circle whose only rows are a name's
    words (no pairs, no diacritics), a name run together, or a birth date is not empty."""
    rows = [row for row in circle_rows(KEY, [_EVERYONE]) if row[0] == kind]
    circle = Circle.from_rows(KEY, rows)
    text, found = _ALONE[kind]
    assert not circle.empty
    assert circle.finds(Reading(text)), text
    assert _found(circle, text) == found
    assert not circle.finds(Reading("Hôm nay em học bài")), kind


def test_a_circle_without_rows_is_empty() -> None:
    circle = Circle.from_rows(KEY, [])
    assert circle.empty
    assert not circle.finds(Reading("Hôm nay Phan Quốc Khôi học bài"))
    assert circle.spans(Reading("Hôm nay Phan Quốc Khôi học bài")) == []


def _database_print(key: bytes, word: str) -> str:
    """A fingerprint as the database computes it, not through this process's cache."""
    return hmac.new(key, word.encode(), hashlib.sha256).digest()[:_DATABASE_BYTES].hex()


def test_a_circle_read_before_any_word_was_fingerprinted_finds_its_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new process: the circle's fingerprints come from the database, and no word has been
    fingerprinted with its key yet."""
    monkeypatch.setattr(circle_module, "_PRINTS", {})
    key = b"a key no word was fingerprinted with"
    name = ("phan", "quoc", "khoi")
    circle = Circle(
        key=key,
        names=(tuple(_database_print(key, word) for word in name),),
        joined_names=frozenset({_database_print(key, "phanquockhoi")}),
        accented=frozenset(_database_print(key, word) for word in ("phan", "quốc", "khôi")),
    )
    text = "Hôm nay Phan Quốc Khôi học bài"
    assert circle.finds(Reading(text))
    assert _found(circle, text) == "name"
    assert not circle.finds(Reading("Hôm nay Phan Quốc Khải học bài"))


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("gặp Phạm Lân nhé", None),  # "Lân" is another name than "Lan"
        ("gặp bạn Lân nhé", None),
        ("gặp Pham Lan nhé", "name"),  # without diacritics: it may be hers
        ("gặp bạn Lan nhé", "name"),
        ("gặp Phạm Lan nhé", "name"),
        ("gặp Phạm Lân, rồi Phạm Lan nhé", "name"),  # written once as the circle writes it
        ("gặp Phạm Lân, rồi Pham Lan nhé", "name"),
    ],
)
def test_a_word_of_the_circle_written_only_with_other_diacritics_is_another_word(
    text: str, found: str | None
) -> None:
    circle = circle_of([Person("Phạm Lan")])
    assert circle.finds(Reading(text)) is (found is not None), text
    assert _found(circle, text) == found


def test_a_text_whose_circle_words_all_carry_other_diacritics_is_settled_by_its_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As ``finds`` promises: a text is read word by word only when its words hold what a match
    needs, and a given name written only with other diacritics than the circle's is not one."""
    circle = circle_of([Person("Phạm Lan")])

    def read_word_by_word(self: Circle, text: object) -> Iterator[object]:
        raise AssertionError("read word by word")

    monkeypatch.setattr(Circle, "_word_spans", read_word_by_word)
    assert not circle.finds(Reading("gặp Phạm Lân nhé"))
    assert not circle.finds(Reading("bạn Lân và bạn Lẫn"))


def test_a_circle_without_words_with_diacritics_finds_its_names_written_with_them() -> None:
    """A circle whose rows carry no words with diacritics (no ``accented`` row) rejects none:
    every spelling of its names is found."""
    rows = [row for row in circle_rows(KEY, [Person("Phạm Lan")]) if row[0] != "accented"]
    circle = Circle.from_rows(KEY, rows)
    for text in ("gặp Phạm Lân nhé", "gặp Phạm Lan nhé", "gặp bạn Lẫn nhé"):
        assert circle.finds(Reading(text)), text
        assert _found(circle, text) == "name", text


def test_a_name_written_letter_by_letter_is_read_as_the_words_it_is_made_of() -> None:
    circle = circle_of([Person("Trần Bảo Ngọc")])
    text = "em là B ả o  N g ọ c nhé"
    reading = Reading(text)
    assert circle.finds(reading)
    # "B ả o" and "N g ọ c" are each read whole, and where they stand is the name.
    assert circle.spans(reading) == [(6, 20, "name")]
    assert identifier_spans(text, circle) == [(6, 20, "name")]
    assert not circle.finds(Reading("em là B ả o  N g ộ c nhé"))
    # Letters that make no word of the circle are read one by one, beside the ones that do.
    assert circle.spans(Reading("x y B a o N g o c")) == [(4, 17, "name")]


_SCHOOL = "Trường THCS Ngô Sĩ Liên"


@pytest.mark.parametrize(
    "text",
    [
        _SCHOOL,  # at the start of the text and at its end
        f"Con ở: {_SCHOOL}, gần nhà.",  # after punctuation, and before it
        f"Hôm nay {_SCHOOL} nghỉ",
        f"Hôm nay {_SCHOOL.upper()} nghỉ",
    ],
)
def test_a_school_is_found_from_the_first_of_the_school_words_before_it_to_its_last_word(
    text: str,
) -> None:
    """The span runs from the first of the school words written right before the school's name
    ("Trường THCS") to the end of the name's last word, not a character more."""
    circle = circle_of([Person("Phan Quốc Khôi", school=_SCHOOL)])
    start = text.casefold().index(_SCHOOL.casefold())
    assert circle.spans(Reading(text)) == [(start, start + len(_SCHOOL), "school")]


def test_a_school_after_one_school_word_is_found_from_that_word() -> None:
    circle = circle_of([Person("Phan Quốc Khôi", school=_SCHOOL)])
    text = "Hôm nay THCS Ngô Sĩ Liên nghỉ"
    assert circle.spans(Reading(text)) == [(8, 24, "school")]
    assert text[8:24] == "THCS Ngô Sĩ Liên"
    # A one-word school, at the end of the text.
    circle = circle_of([Person("Phan Quốc Khôi", school="Trường Amsterdam")])
    assert circle.spans(Reading("Con ở trường Amsterdam")) == [(6, 22, "school")]


@pytest.mark.parametrize(
    "text",
    [
        "số 0912 345 678 nhé",  # with the trunk prefix
        "số +84 912 345 678 nhé",  # with the country code
        "số 0084912345678 nhé",
        "số 12 912345678 nhé",  # the trailing digits of a longer run
    ],
)
def test_a_phone_is_found_as_the_trailing_digits_of_a_longer_run(text: str) -> None:
    circle = circle_of([Person("Phan Quốc Khôi", phone="0912 345 678")])
    start = next(index for index, char in enumerate(text) if char.isdigit())
    assert circle.spans(Reading(text)) == [(start, len(text) - 4, "phone")], text


def test_a_number_shorter_than_a_phone_is_not_looked_for_at_the_end_of_a_run() -> None:
    """A stored number of seven digits (a short local number, or one mistyped) is not a phone the
    gate looks for: the tail of a longer run of digits that ends with it is not it."""
    circle = circle_of([Person("Phan Quốc Khôi", phone="0234 5678")])
    for text in ("số 91 234 5678 nhé", "số 0912345678 nhé", "mã 12345678"):
        assert not circle.finds(Reading(text)), text
        assert circle.spans(Reading(text)) == [], text


def test_a_circle_cannot_be_changed_once_built() -> None:
    """Its identity is worked out once and remembered verdicts hang on it: a circle changed after
    would keep the identity of the circle it was."""
    circle = circle_of([Person("Phan Quốc Khôi", phone="0912 345 678")])
    identity = circle.identity
    with pytest.raises(dataclasses.FrozenInstanceError):
        circle.phones = frozenset()  # type: ignore[misc]
    assert circle.identity == identity
    assert hash(circle) == hash(circle_of([Person("Phan Quốc Khôi", phone="0912 345 678")]))


@pytest.mark.parametrize(
    "text",
    [
        "Lan là bạn",  # the given name first: no word before it, whatever ends the text
        "gặp bạn, Lan nhé",  # a comma between: the person word is not hers
        "gặp bạn: Lan nhé",
    ],
)
def test_a_given_name_alone_is_found_only_written_right_after_a_person_word(text: str) -> None:
    circle = circle_of([Person("Phạm Lan")])
    assert circle.spans(Reading(text)) == [], text
    assert not circle.finds(Reading(text)), text


@pytest.mark.parametrize(
    "text",
    [
        "tài khoản khoi, phan.hs nhé",  # a comma between the first two words
        "tài khoản khoi.phan, hs nhé",  # or between the last two
        "gặp ở 27, Đội Cấn nhé",
        "gặp ở 27 Đội, Cấn nhé",
    ],
)
def test_an_email_or_an_address_is_found_only_with_every_word_written_close(text: str) -> None:
    circle = circle_of([_EVERYONE])
    kinds = {kind for _, _, kind in circle.spans(Reading(text))}
    assert not kinds & {"email", "address"}, text


def test_every_email_and_address_of_the_circle_is_looked_for() -> None:
    """The circle's e-mail addresses and addresses are each looked for, whichever come before them
    and are not in the text."""
    circle = circle_of(
        [
            Person("Lê Anh", email="anh.le@example.org", address="3 Hàng Bài, Hoàn Kiếm"),
            Person("Phan Quốc Khôi", email="khoi.phan.hs@example.org", address="27 Đội Cấn"),
        ]
    )
    for text, kind in (("tài khoản khoi.phan.hs nhé", "email"), ("gặp ở 27 Đội Cấn", "address")):
        spans = circle.spans(Reading(text))
        assert [found for _, _, found in spans if found != "name"] == [kind], text
    # From the first word's first character to the last word's last one.
    assert circle.spans(Reading("gặp ở 27 Đội Cấn")) == [(6, 16, "address")]
    assert circle.spans(Reading("mail khoi.phan.hs nhé")) == [(5, 14, "name"), (5, 17, "email")]
    circle = circle_of(
        [
            Person("Phan Quốc Khôi", email="khoi.phan.hs@example.org", address="27 Đội Cấn"),
            Person("Lê Anh", email="anh.le@example.org", address="3 Hàng Bài, Hoàn Kiếm"),
        ]
    )
    for text, kind in (("tài khoản anh.le nhé", "email"), ("gặp ở 3 Hàng Bài", "address")):
        spans = circle.spans(Reading(text))
        assert [found for _, _, found in spans if found != "name"] == [kind], text


def test_overlapping_identifiers_are_one_span_from_the_first_start_to_the_last_end() -> None:
    circle = circle_of([_EVERYONE])
    text = "mail khoi.phan.hs nhé"
    assert identifier_spans(text, circle) == [(5, 17, "name")]


# Each word a person is addressed or named by, written out: a rule list that lost one would
# let "bố Hùng" through.
PERSON_WORDS_WRITTEN = [
    "bạn", "em", "anh", "chị", "bố", "mẹ", "má", "cô", "chú", "bác", "thầy", "ông", "bà", "cậu",
    "mợ", "dì", "dượng", "cháu", "bé", "nhóc", "mr", "Mrs", "Ms", "miss", "dear", "hi", "Hello",
    "aunt", "uncle",
]  # fmt: skip


@pytest.mark.parametrize("word", PERSON_WORDS_WRITTEN)
def test_a_given_name_alone_is_found_after_every_person_word(word: str) -> None:
    circle = circle_of([Person("Phạm Khuê")])
    text = f"hôm nay {word} Khuê đến"
    start = text.index("Khuê")
    assert circle.spans(Reading(text)) == [(start, start + len("Khuê"), "name")]
    assert circle.spans(Reading("hôm nay Khuê đến")) == []


# A person word and the word after it that are together an ordinary word, written out.
ORDINARY_PAIRS_WRITTEN = [
    "anh hùng", "anh dũng", "anh minh", "anh tài", "anh tuấn", "anh hào", "anh linh", "anh thư",
    "em bé", "bà con", "ông bà", "cô đơn", "cô gái", "cậu bé", "bé nhỏ", "chú ý", "bác sĩ",
    "thầy giáo", "cô giáo", "mẹ hiền", "em trai", "em gái", "anh em", "chị em", "hi vọng",
]  # fmt: skip


@pytest.mark.parametrize("pair", ORDINARY_PAIRS_WRITTEN)
def test_a_person_word_and_a_word_that_make_an_ordinary_word_name_nobody(pair: str) -> None:
    word = pair.split()[1]
    circle = circle_of([Person(f"Nguyễn {word.capitalize()}")])
    assert circle.spans(Reading(f"đó là {pair} nhé")) == []
    # The same given name after another person word is the person.
    assert circle.spans(Reading(f"đó là bạn {word} nhé")) != []


# Each kind of school, written out: the school is found from the kind's first word.
SCHOOL_KINDS_WRITTEN = [
    "trường", "THCS", "THPT", "TH", "tiểu học", "trung học cơ sở", "phổ thông", "chuyên",
    "mầm non", "lớp", "school", "primary", "secondary", "high", "middle",
]  # fmt: skip


@pytest.mark.parametrize("kind", SCHOOL_KINDS_WRITTEN)
def test_a_school_is_found_after_every_kind_of_school_from_its_first_word(kind: str) -> None:
    circle = circle_of([Person("Phạm Khuê", school="Lê Quý Đôn")])
    text = f"em ở {kind} Lê Quý Đôn nhé"
    assert circle.spans(Reading(text)) == [(len("em ở "), text.index(" nhé"), "school")]
    assert circle.spans(Reading("em ở Lê Quý Đôn nhé")) == []
