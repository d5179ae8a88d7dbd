"""Forbidden field names, concept by concept, in every way a field name is written.

The vocabulary is this file's own statement of what must never leave the service (a person's
name, contact, birth, pictures, accounts elsewhere, identity documents, the child's own words,
and the keys of people, households and schools) and of names that are safe, written from those
concepts and never read from the gate's tables: a word taken out of a table fails here. Every
concept is checked in every spelling, exhaustively, so the verdict never depends on a draw.
"""

from __future__ import annotations

import itertools
import unicodedata

import pytest
from hypothesis import given

from nemo_context.gate import (
    find_forbidden_name,
    find_leak,
    forbidden_names_in,
    is_forbidden_name,
)

from .spellings import FORBIDDEN_NAME, PROPERTY, SAFE_NAME


def _spellings(words: tuple[str, ...]) -> list[str]:
    """snake, SCREAMING, camel, Pascal, kebab, run together (both cases), dotted and spaced."""
    camel = words[0] + "".join(word.capitalize() for word in words[1:])
    together = "".join(words)
    return [
        "_".join(words),
        "_".join(words).upper(),
        camel,
        camel[0].upper() + camel[1:],
        "-".join(words),
        together,
        together.upper(),
        ".".join(words),
        " ".join(words),
    ]


def _refused_in_no_spelling(concepts: list[tuple[str, ...]]) -> list[str]:
    return [s for words in concepts for s in _spellings(words) if not is_forbidden_name(s)]


def _refused_in_some_spelling(concepts: list[tuple[str, ...]]) -> list[str]:
    return [s for words in concepts for s in _spellings(words) if is_forbidden_name(s)]


PERSONAL = [
    # A person's name, however it is qualified.
    *((word, "name") for word in ("first", "last", "middle", "given", "display", "real")),
    *((word, "name") for word in ("legal", "maiden", "full", "nick", "sur", "user")),
    ("full", "names"),
    ("nick", "names"),
    ("sur", "names"),
    ("his", "name"),
    ("her", "name"),
    ("my", "name"),
    ("their", "names"),
    ("guardian", "name"),
    ("name",),
    ("names",),
    # Contact and whereabouts.
    ("email",),
    ("emails",),
    ("mail",),
    ("e", "mail"),
    ("e", "address"),
    ("contact", "email"),
    ("secondary", "email"),
    ("phone",),
    ("phones",),
    ("telephone",),
    ("tele", "phones"),
    ("cell", "phone"),
    ("work", "phone"),
    ("primary", "phone"),
    ("mobile", "number"),
    ("sdt",),
    ("address",),
    ("addresses",),
    ("home", "address"),
    ("street",),
    # Birth.
    ("birth",),
    ("birthday",),
    ("birthdate",),
    ("birthplace",),
    ("born",),
    ("dob",),
    ("date", "of", "birth"),
    ("day", "of", "birth"),
    ("place", "of", "birth"),
    ("year", "of", "birth"),
    # Pictures and accounts elsewhere.
    ("avatar",),
    ("avatars",),
    ("avatar", "url"),
    ("photo",),
    ("photos",),
    ("photo", "urls"),
    ("selfie",),
    ("profile", "picture"),
    ("profile", "pic"),
    ("profile", "image"),
    ("facebook", "link"),
    ("instagram",),
    ("tiktok",),
    ("twitter",),
    ("zalo",),
    ("linkedin",),
    ("social", "links"),
    ("social", "profile"),
    ("links", "json"),
    # Identity documents.
    ("passport",),
    ("ssn",),
    ("cccd",),
    ("cmnd",),
    ("national", "id"),
    ("citizen", "id"),
    # People the child is linked to, and the child's own words.
    ("guardian",),
    ("guardians",),
    ("payload",),
    ("verbatim",),
    # Vietnamese column names, without diacritics.
    ("ho", "ten"),
    ("ho", "va", "ten"),
    ("ngay", "sinh"),
    ("dien", "thoai"),
    ("so", "dien", "thoai"),
    ("dia", "chi"),
    ("ten", "truong"),
]

PEOPLE = [
    "user", "users", "learner", "learners", "student", "students", "pupil", "pupils", "child",
    "children", "kid", "kids", "family", "families", "parent", "parents", "mentor", "mentors",
    "teacher", "teachers", "member", "members", "owner", "owners", "account", "accounts",
    "person", "people", "sibling", "siblings", "supporter", "supporters", "school", "schools",
    "guardian", "guardians",
]  # fmt: skip
"""Whose keys are for binding only: people, households, schools."""
KEYS = ["id", "ids", "key", "keys", "uid", "uuid", "code", "number", "no"]
"""What a key of someone is called."""

SAFE = [
    # Names of things, not of people.
    *(
        (thing, "name")
        for thing in (
            "node",
            "subject",
            "strand",
            "topic",
            "lesson",
            "unit",
            "course",
            "package",
            "competency",
            "skill",
            "milestone",
            "activity",
            "tool",
            "prompt",
            "model",
            "file",
            "exam",
            "theorem",
            "formula",
            "chapter",
        )
    ),
    # Keys of things; a person before a thing is the thing's qualifier.
    ("node", "id"),
    ("node", "ids"),
    ("topic", "node", "id"),
    ("parent", "node", "id"),
    ("message", "id"),
    ("turn", "id"),
    ("session", "id"),
    ("error", "code"),
    ("page", "number"),
    ("learner", "ref"),
    # Words that hold a forbidden word's letters, and the parts of forbidden phrases alone.
    ("photosynthesis",),
    ("phoneme",),
    ("hostname",),
    ("tournament",),
    ("named", "entity"),
    ("social", "studies"),
    ("national", "curriculum"),
    ("profile",),
    ("picture",),
    ("links",),
    ("citizen",),
    ("mobile",),
    ("number",),
    ("ten",),
    ("truong",),
    ("ngay",),
    ("sinh",),
    ("json",),
    ("title",),
    ("grade",),
    ("mastery",),
]


def test_every_personal_concept_is_forbidden_in_every_spelling() -> None:
    assert _refused_in_no_spelling(PERSONAL) == []


@pytest.mark.parametrize("person", PEOPLE)
def test_a_key_of_a_person_a_household_or_a_school_is_forbidden(person: str) -> None:
    assert _refused_in_no_spelling([(person, key) for key in KEYS]) == []
    assert _refused_in_no_spelling([("primary", person, "id"), ("their", person, "ids")]) == []
    assert not is_forbidden_name(person) or person.startswith("guardian")  # alone: a word


def test_the_same_keys_of_things_are_not() -> None:
    things = ["node", "message", "item", "topic", "session", "turn", "page", "error"]
    assert _refused_in_some_spelling([(thing, key) for thing in things for key in KEYS]) == []


def test_names_of_things_and_ordinary_words_pass_in_every_spelling() -> None:
    assert _refused_in_some_spelling(SAFE) == []


def test_a_safe_name_is_safe_only_whole() -> None:
    assert is_forbidden_name("learner_tool_name")
    assert is_forbidden_name("school_name")
    assert is_forbidden_name("file_name_of_user")


def test_the_words_of_a_name_come_from_its_case_digits_and_separators() -> None:
    assert is_forbidden_name("learnerIDs")
    assert is_forbidden_name("userID2")
    assert is_forbidden_name("email2")
    assert is_forbidden_name("HTMLEmail")
    assert is_forbidden_name("\uff25\uff2d\uff21\uff29\uff2c")  # EMAIL in full width
    assert not is_forbidden_name("nodeIDs")
    assert not is_forbidden_name("")
    assert not is_forbidden_name("__")
    assert not is_forbidden_name("x" * 65 + "email")  # not made of words: read as one word


@pytest.mark.parametrize("repeat", [1, 15, 16, 17, 200])
def test_a_run_together_name_is_split_however_long(repeat: int) -> None:
    assert is_forbidden_name("node" * repeat + "email")
    assert is_forbidden_name("email" + "topic" * repeat)
    assert is_forbidden_name("lesson" * repeat + "phonenumber")
    assert not is_forbidden_name("node" * repeat + "code")


def test_names_are_listed_in_their_order() -> None:
    names = ["node_id", "email", "title", "userId", "display_name", "tool_name"]
    assert forbidden_names_in(names) == ["email", "userId", "display_name"]


def test_concepts_and_spellings_combine_freely() -> None:
    # Two forbidden concepts in one name, and forbidden words inside longer names.
    for first, second in itertools.product(["email", "phone", "dob"], ["status", "verified"]):
        assert is_forbidden_name(f"{first}_{second}")
        assert is_forbidden_name(f"{second}{first.capitalize()}")


# Characters a renderer hides, and letters of other scripts that pass for Latin ones: this
# file's own short lists (Unicode's Default_Ignorable_Code_Point and confusables data).
INVISIBLE = ["\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\U000e0041"]
LOOK_ALIKES = {
    "a": "\u0430",  # Cyrillic
    "c": "\u0441",
    "e": "\u0435",
    "o": "\u043e",
    "p": "\u0440",
    "x": "\u0445",
    "y": "\u0443",
    "s": "\u0455",
    "i": "\u0456",
}


def _hidden(spelling: str, invisible: str) -> str:
    middle = len(spelling) // 2
    return spelling[:middle] + invisible + spelling[middle:]


def _disguised(spelling: str) -> str | None:
    """``spelling`` with its first letter that has a look-alike replaced by it, in its case."""
    for index, char in enumerate(spelling):
        other = LOOK_ALIKES.get(char.lower())
        if other is not None:
            other = other.upper() if char.isupper() else other
            return spelling[:index] + other + spelling[index + 1 :]
    return None


def test_a_forbidden_name_is_forbidden_with_a_hidden_character_in_it() -> None:
    missed = [
        hidden
        for words in PERSONAL
        for spelling in _spellings(words)
        for invisible in INVISIBLE
        if not is_forbidden_name(hidden := _hidden(spelling, invisible))
    ]
    assert missed == []
    assert all(is_forbidden_name(f"{invisible}email") for invisible in INVISIBLE)


def test_a_forbidden_name_is_forbidden_spelled_with_look_alike_letters() -> None:
    disguised = [
        name for words in PERSONAL for s in _spellings(words) if (name := _disguised(s)) is not None
    ]
    assert len(disguised) > len(PERSONAL) * 5
    assert [name for name in disguised if not is_forbidden_name(name)] == []
    assert is_forbidden_name("\u0440\u04bb\u043e\u0578\u0435")  # every letter of "phone" disguised


def test_safe_names_stay_safe_with_hidden_or_look_alike_characters() -> None:
    names = [spelling for words in SAFE for spelling in _spellings(words)]
    variants = [_hidden(name, invisible) for name in names for invisible in INVISIBLE]
    variants += [disguised for name in names if (disguised := _disguised(name)) is not None]
    assert [name for name in variants if is_forbidden_name(name)] == []


@PROPERTY
@given(name=FORBIDDEN_NAME)
def test_forbidden_concepts_are_forbidden_in_every_spelling(name: str) -> None:
    assert is_forbidden_name(name)


@PROPERTY
@given(name=SAFE_NAME)
def test_safe_names_pass_in_every_spelling(name: str) -> None:
    assert not is_forbidden_name(name)


def test_plural_acronyms_and_digits_split_as_words() -> None:
    assert is_forbidden_name("learnerIDs")
    assert is_forbidden_name("userID2")
    assert is_forbidden_name("email2")
    assert not is_forbidden_name("nodeIDs")


# Vietnamese field names as Vietnamese is written: with diacritics, "đ", any separator, in any
# case, abbreviated, decorated, in full-width forms. This file's own list.

VIETNAMESE_FIELDS = [
    "họ tên", "họ và tên", "tên học sinh", "tên phụ huynh", "tên bố", "tên mẹ",
    "số điện thoại", "điện thoại", "SĐT", "địa chỉ", "ngày sinh", "năm sinh", "nơi sinh",
    "sinh nhật", "tên trường", "trường học", "mã học sinh", "mã số học sinh",
    "ảnh đại diện", "phụ huynh", "người giám hộ", "quê quán", "tên con", "tên đệm", "nơi ở",
]  # fmt: skip
ORDINARY_VIETNAMESE = ["tiêu đề", "môn học", "điểm số", "trường hợp", "năm học", "lớp"]


def _vietnamese_spellings(name: str) -> list[str]:
    words = name.split()
    plain = unicodedata.normalize("NFD", name.replace("đ", "d").replace("Đ", "D"))
    plain = "".join(char for char in plain if not unicodedata.combining(char))
    # Run together only when no word is of one or two letters: "tênbố" stays one word, as
    # "phoneme" must ("me" and "bo" would split English words).
    separators = ("_", "-", ".", " ", *(("",) if all(len(w) > 2 for w in plain.split()) else ()))
    return [
        *(separator.join(words) for separator in separators),
        "_".join(words).upper(),
        "".join(word.capitalize() for word in words),
        "_".join(plain.split()),
        "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in "_".join(words)),
    ]


@pytest.mark.parametrize("name", VIETNAMESE_FIELDS)
def test_vietnamese_field_names_are_forbidden_as_written(name: str) -> None:
    assert _refused_in_no_spelling_of(_vietnamese_spellings(name)) == []


@pytest.mark.parametrize("name", VIETNAMESE_FIELDS)
def test_vietnamese_field_names_written_into_text_are_keys(name: str) -> None:
    for written in (
        f"{name}: x",
        f"**{name}**: x",
        f"{name}\uff1a x",
        f'{{"{name}": "x"}}',
        f"- {name.upper()}: x",
    ):
        assert find_forbidden_name(written) or find_leak(written, forbidden_values=()), written


@pytest.mark.parametrize("name", ORDINARY_VIETNAMESE)
def test_ordinary_vietnamese_names_pass(name: str) -> None:
    assert [s for s in _vietnamese_spellings(name) if is_forbidden_name(s)] == []
    assert find_leak(f"{name}: 8", forbidden_values=()) is None


def test_a_line_of_prose_ending_in_a_colon_is_no_key() -> None:
    for prose in ("Write your address: here", "Em hãy viết họ tên của nhân vật: Lan"):
        assert find_leak(prose, forbidden_values=()) is None


def _refused_in_no_spelling_of(spellings: list[str]) -> list[str]:
    return [spelling for spelling in spellings if not is_forbidden_name(spelling)]


@pytest.mark.parametrize(
    "name", ["hoten", "hovaten", "sodienthoai", "ngaysinh", "diachi", "HOVATEN"]
)
def test_vietnamese_field_names_run_together_without_diacritics_are_forbidden(name: str) -> None:
    # Their short words ("ho", "va", "so") split a run-together name; other short words do not.
    assert is_forbidden_name(name)
