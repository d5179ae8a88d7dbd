"""Folding: what a reader reads as the same text folds to the same text, and nothing else moves."""

from __future__ import annotations

import random
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from nemo_core.text import fold, fold_with_positions, is_significant, words

# Written out here rather than taken from the module: a test must not derive its cases from the
# constant it tests.
_UNSEEN = ["\u00ad", "\u200b", "\u200c", "\u200d", "\u200e", "\u202e", "\u2060", "\ufeff"]
_TONES = ["", "\u0300", "\u0301", "\u0303", "\u0309", "\u0323"]  # huyền sắc ngã hỏi nặng
_VOWEL_MARKS = {"a": ["", "\u0302", "\u0306"], "e": ["", "\u0302"], "o": ["", "\u0302", "\u031b"]}
_VOWEL_MARKS |= {"u": ["", "\u031b"], "i": [""], "y": [""]}


@st.composite
def vietnamese_letters(draw: st.DrawFn) -> tuple[str, str]:
    """A letter as Vietnamese writes it (precomposed, any case) and its bare lower-case letter."""
    base = draw(st.sampled_from([*_VOWEL_MARKS, *"bcdghklmnpqrstvx"]))
    if base == "d" and draw(st.booleans()):
        return draw(st.sampled_from("đĐ")), "d"
    marks = draw(st.sampled_from(_VOWEL_MARKS.get(base, [""]))) + draw(
        st.sampled_from(_TONES if base in _VOWEL_MARKS else [""])
    )
    letter = base.upper() if draw(st.booleans()) else base
    return unicodedata.normalize("NFC", letter + marks), base


@given(st.lists(vietnamese_letters(), max_size=30))
def test_vietnamese_folds_to_bare_lower_case_letters(letters: list[tuple[str, str]]) -> None:
    written = "".join(letter for letter, _ in letters)
    assert fold(written) == "".join(bare for _, bare in letters)
    assert fold(unicodedata.normalize("NFD", written)) == fold(written)


def test_examples_of_search_text() -> None:
    assert fold("Hệ số góc") == "he so goc"
    assert fold("ĐẠO HÀM") == "dao ham"
    assert fold("Định lí Thalès") == "dinh li thales"
    assert fold("Xác thực ĐĂNG NHẬP đường") == "xac thuc dang nhap duong"
    assert words("Phương trình bậc hai: ax² + bx + c = 0") == [
        *("phuong", "trinh", "bac", "hai", "ax", "bx", "c", "0")
    ]


@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40))
def test_full_width_forms_read_as_ascii(text: str) -> None:
    full_width = "".join(chr(ord(char) - 0x21 + 0xFF01) for char in text)
    assert fold(full_width) == text.lower()


def test_look_only_forms_fold_and_value_forms_stay() -> None:
    # Mathematical bold, a ligature, a circled letter.
    assert fold("\U0001d408\U0001d406\U0001d40d \ufb01le \u24b6") == "ign file a"
    assert fold("Straße ΟΔΟΣ") == "strasse οδοσ"
    assert fold("x² + y³ = ½ H₂O") == "x² + y³ = ½ h₂o"
    assert words("(a + b)² ạ") == ["a", "b", "a"]


@given(st.text(max_size=40), st.lists(st.sampled_from(_UNSEEN), max_size=5), st.randoms())
def test_invisible_characters_change_nothing(
    text: str, unseen: list[str], rng: random.Random
) -> None:
    chars = list(text)
    for char in unseen:
        chars.insert(rng.randint(0, len(chars)), char)
    assert fold("".join(chars)) == fold(text)


@given(st.text(max_size=60))
def test_folded_text_is_a_fixed_point_in_lower_case_without_marks(text: str) -> None:
    folded = fold(text)
    assert fold(folded) == folded
    assert folded == folded.casefold()
    assert not any(unicodedata.combining(char) for char in folded)
    assert not any(char in folded for char in _UNSEEN)


@given(st.text(max_size=60))
def test_positions_map_every_folded_character_to_its_origin(text: str) -> None:
    folded, origins = fold_with_positions(text)
    assert folded == fold(text)
    assert len(origins) == len(folded)
    assert origins == sorted(origins)
    for index, origin in enumerate(origins):
        assert folded[index] in fold(text[origin])


def test_positions_of_a_vietnamese_text() -> None:
    folded, origins = fold_with_positions("Ấn độ\u200b!")
    assert folded == "an do!"
    assert origins == [0, 1, 2, 3, 4, 6]


@given(st.text(max_size=60))
def test_words_are_runs_of_ascii_letters_and_digits(text: str) -> None:
    found = words(text)
    assert all(word.isascii() and word.isalnum() and word == word.lower() for word in found)
    assert "".join(found) == "".join(char for char in fold(text) if char in _ALNUM)


_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


@given(st.text(alphabet=sorted(_ALNUM), min_size=2, max_size=8), st.integers(0, 10**6))
def test_words_of_two_characters_and_numbers_are_significant(word: str, number: int) -> None:
    assert is_significant(word)
    assert is_significant(str(number))


@given(st.sampled_from(sorted(_ALNUM - set("0123456789"))))
def test_single_letters_are_not_significant(letter: str) -> None:
    assert not is_significant(letter)
