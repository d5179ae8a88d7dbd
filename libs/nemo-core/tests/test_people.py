"""People's ids are compared canonically: every way of writing one id is the same person, and
ids that differ in a letter or digit are not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nemo_core.people import canonical_id, same_person

_IDS = st.from_regex(r"[A-Z]{1,2}-[0-9]{2,4}-[A-Z][0-9]{1,3}", fullmatch=True)
_INVISIBLE = ["\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad"]


@st.composite
def written_otherwise(draw: st.DrawFn, user_id: str) -> str:
    """``user_id`` in another case, with other or no separators, full-width or look-alike
    letters, invisible characters and trailing punctuation."""
    out = []
    for char in user_id:
        if char == "-":
            char = draw(st.sampled_from(["-", "_", ".", ":", " ", "", "\u2010", "\u2212"]))
        elif char.isalpha():
            char = draw(st.sampled_from([char.lower(), char.upper()]))
        if char and "!" <= char <= "~" and draw(st.booleans()):
            char = chr(ord(char) + 0xFEE0)  # the full-width form
        out.append(char + draw(st.sampled_from(["", "", *_INVISIBLE])))
    return "".join(out) + draw(st.sampled_from(["", ",", ";", ".", " ", "\u00a0", ",\n"]))


@given(data=st.data(), user_id=_IDS)
def test_every_way_of_writing_an_id_is_the_same_person(data: st.DataObject, user_id: str) -> None:
    variant = data.draw(written_otherwise(user_id))
    assert same_person(user_id, variant)
    assert canonical_id(variant) == canonical_id(user_id)


@given(user_id=_IDS, data=st.data())
def test_ids_that_differ_in_a_letter_or_digit_are_different_people(
    user_id: str, data: st.DataObject
) -> None:
    position = data.draw(st.sampled_from([i for i, char in enumerate(user_id) if char.isalnum()]))
    original = user_id[position]
    replacement = data.draw(
        st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789").filter(
            lambda char: char != original.upper()
        )
    )
    other = user_id[:position] + replacement + user_id[position + 1 :]
    assert not same_person(user_id, other)


@given(blank=st.sampled_from(["", None, " ", "-", ",", "\u200b"]), user_id=_IDS)
def test_an_id_that_names_nobody_is_nobody(blank: str | None, user_id: str) -> None:
    assert not same_person(blank, blank)
    assert not same_person(blank, user_id)
