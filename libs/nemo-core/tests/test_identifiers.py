"""Keys: the format the gate can match without ambiguity, and where a text mentions one."""

from __future__ import annotations

import json
import re
import string
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_core.identifiers import KEY_PATTERN, is_key, mention_pattern

_KEY_CHARS = string.ascii_letters + string.digits + "._:-"
_LETTER_OR_DIGIT = string.ascii_letters + string.digits


@st.composite
def keys(draw: st.DrawFn) -> str:
    """A key built from the format in words: a letter or digit first, 8 to 128 characters, at
    least one letter and one digit somewhere."""
    first = draw(st.sampled_from(_LETTER_OR_DIGIT))
    rest = draw(st.text(alphabet=_KEY_CHARS, min_size=5, max_size=125))
    letter = draw(st.sampled_from(string.ascii_letters))
    digit = draw(st.sampled_from(string.digits))
    middle = list(rest)
    middle.insert(draw(st.integers(0, len(middle))), letter)
    middle.insert(draw(st.integers(0, len(middle))), digit)
    return first + "".join(middle)


@pytest.mark.parametrize(
    "key", ["L-2041-1", "U-2041-P1", "F-2041-10", str(uuid.uuid4()), "lrn_01J9Z3K2M8"]
)
def test_usual_keys_are_keys(key: str) -> None:
    assert is_key(key)


@pytest.mark.parametrize(
    "plain",
    ["8", "35", "F-1", "L-1", "student", "12345678", "abcdefgh", "L-2041-1\n", "L 2041 1", ""],
)
def test_short_or_plain_values_are_not(plain: str) -> None:
    assert not is_key(plain)


@given(keys())
def test_every_key_of_the_format_is_a_key(key: str) -> None:
    assert is_key(key)
    assert not is_key(key + "x" * (129 - len(key)))  # one character too many
    assert not is_key("-" + key[1:])  # punctuation first
    assert not is_key(key[:3] + " " + key[3:])


@given(st.text(alphabet="0123456789", min_size=1, max_size=40))
def test_numbers_are_never_keys(number: str) -> None:
    assert not is_key(number)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=40))
def test_words_are_never_keys(word: str) -> None:
    assert not is_key(word)


@given(st.text(max_size=140))
def test_the_published_pattern_and_the_check_agree(value: str) -> None:
    # The pattern goes into JSON Schema anchored with ^ and $; Python's $ would admit a final
    # newline, which the check (a full match) refuses.
    assert is_key(value) == (re.fullmatch(f"^{KEY_PATTERN}$", value) is not None)


_SEPARATORS = [" ", "_", "-", ".", ":", "(", ")", '"', "/", "\n", "\u2013", ""]


@given(keys(), st.sampled_from(_SEPARATORS), st.sampled_from(_SEPARATORS), st.text(max_size=20))
def test_a_key_between_boundaries_is_mentioned_in_any_case(
    key: str, before: str, after: str, prose: str
) -> None:
    pattern = mention_pattern([key])
    assert pattern is not None
    for spelling in (key, key.lower(), key.upper()):
        assert pattern.search(f"{prose} {before}{spelling}{after}") is not None


@given(keys(), st.sampled_from(_LETTER_OR_DIGIT + "đéЖ٣"), st.booleans())
def test_a_key_inside_a_longer_word_is_not_mentioned(key: str, neighbour: str, left: bool) -> None:
    pattern = mention_pattern([key])
    assert pattern is not None
    text = neighbour + key if left else key + neighbour
    found = pattern.search(text)
    # A mention can only be the key itself at another place (a key that repeats its own tail).
    assert found is None or found.group().lower() == key.lower()
    if found is not None:
        assert found.start() > 0 or found.end() < len(text)


def test_examples_of_mentions() -> None:
    pattern = mention_pattern(["L-2041-1"])
    assert pattern is not None
    for text in [
        '{"note": "about L-2041-1"}',
        "(L-2041-1)",
        "X_L-2041-1",
        "l-2041-1.",
        "L-2041-1-b",
    ]:
        assert pattern.search(text), text
    for text in ['{"note": "about L-2041-10"}', "XL-2041-1", "L-2041-1x", "L-2041-12"]:
        assert not pattern.search(text), text


def test_the_longest_of_overlapping_keys_is_found_whole() -> None:
    pattern = mention_pattern(["L-2041-1", "L-2041-1-2", ""])
    assert pattern is not None
    assert [m.group() for m in pattern.finditer("L-2041-1-2 and L-2041-1")] == [
        "L-2041-1-2",
        "L-2041-1",
    ]
    assert mention_pattern([]) is None
    assert mention_pattern([""]) is None


@given(keys(), st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4))
def test_a_key_in_json_output_is_mentioned(key: str, other: dict[str, str]) -> None:
    pattern = mention_pattern([key])
    assert pattern is not None
    assert pattern.search(json.dumps({**other, "note": f"for {key}"}, ensure_ascii=False))
