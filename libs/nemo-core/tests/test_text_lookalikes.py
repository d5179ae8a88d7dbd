"""The folding of the text checks: look-alike letters, digits of every script and every
default-ignorable character make no difference, and plain text folds as ``fold`` folds it."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from nemo_core.text import fold, fold_lookalikes, fold_lookalikes_with_positions

# Written out here, not taken from the confusables data the module reads: Cyrillic and Greek
# letters that pass for Latin ones, and signs that pass for ASCII punctuation.
_LOOK_ALIKES = {
    "a": ["\u0430", "\u03b1"],
    "c": ["\u0441"],
    "e": ["\u0435"],
    "i": ["\u0456", "\u03b9"],
    "o": ["\u043e", "\u03bf"],
    "p": ["\u0440"],
    "x": ["\u0445"],
    "y": ["\u0443"],
    "/": ["\u2044", "\u2215"],
    ":": ["\u0589", "\u2236"],
    "<": ["\u2039", "\u02c2"],
}
# Zero-width, bidirectional embeddings, overrides and isolates, tag characters, variation
# selectors: none shows.
_IGNORABLE = ["\u200b", "\u202e", "\u2066", "\u2069", "\U000e0041", "\U000e007f", "\ufe0f"]
_DIGITS = {
    "arabic-indic": "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669",
    "devanagari": "\u0966\u0967\u0968\u0969\u096a\u096b\u096c\u096d\u096e\u096f",
    "full-width": "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19",
}


@given(st.text(alphabet="".join(_LOOK_ALIKES), min_size=1, max_size=30), st.randoms())
def test_look_alikes_read_as_the_ascii_they_imitate(text: str, rng: random.Random) -> None:
    written = "".join(rng.choice(_LOOK_ALIKES[char]) for char in text)
    assert fold_lookalikes(written) == text


@given(st.text(alphabet="abc xyz09", max_size=30), st.lists(st.integers(0, 30), max_size=5))
def test_default_ignorable_characters_are_dropped_by_both_foldings(
    text: str, points: list[int]
) -> None:
    chars = list(text)
    for point in points:
        chars.insert(point % (len(chars) + 1), _IGNORABLE[point % len(_IGNORABLE)])
    hidden = "".join(chars)
    assert fold(hidden) == fold(text)
    assert fold_lookalikes(hidden) == fold_lookalikes(text)


def test_digits_of_every_script_read_as_ascii_digits() -> None:
    for script, digits in _DIGITS.items():
        assert fold_lookalikes(digits) == "0123456789", script


@given(st.text(max_size=40))
def test_positions_point_at_the_characters_folded(text: str) -> None:
    folded, origins = fold_lookalikes_with_positions(text)
    assert folded == fold_lookalikes(text)
    assert len(origins) == len(folded)
    assert origins == sorted(origins)
    assert all(0 <= index < len(text) for index in origins)


def test_vietnamese_and_ascii_fold_as_fold_does() -> None:
    for text in ("Hệ số góc", "ĐẠO HÀM", "Phương trình bậc hai: ax² + bx + c = 0", "x < 3"):
        assert fold_lookalikes(text) == fold(text)
