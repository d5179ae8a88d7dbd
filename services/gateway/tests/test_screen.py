"""The reply screen releases only text that passes its check together with everything released
before it, however the deltas are cut; it drops hidden characters and bounds the reply."""

from __future__ import annotations

import itertools
import random
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_core.text import fold_lookalikes
from nemo_gateway.prompts.common import plain_text_problem
from nemo_gateway.screen import (
    HOLD_BACK_CHARS,
    MAX_HELD_CHARS,
    ReplyRejected,
    ReplyScreen,
    ReplyTooLong,
)
from nemo_testing import corpora
from nemo_testing.corpora.markup import markup

CLAIMS = [row.text for row in corpora.load("score_claims") if row.label == "claim"]
OPENING = "Em làm từng bước nhé. "
ROOMY = {"max_chars": 100_000, "max_deltas": 100_000}


def _cuts(text: str, points: list[int]) -> list[str]:
    edges = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    return [text[a:b] for a, b in itertools.pairwise(edges)]


def _accept(text: str) -> str | None:
    return None


@given(st.text(alphabet="ab .!?\n", max_size=60), st.lists(st.integers(0, 60), max_size=8))
def test_accepted_text_comes_out_whole_in_order(text: str, points: list[int]) -> None:
    screen = ReplyScreen(_accept, **ROOMY)
    released = [screen.feed(piece) for piece in _cuts(text, points)]
    assert "".join(released) + screen.flush() == text == screen.shown_text


@given(
    st.sampled_from(CLAIMS),
    st.integers(0, 2 * MAX_HELD_CHARS),
    st.lists(st.integers(0, 3 * MAX_HELD_CHARS), max_size=12),
)
def test_a_rejected_text_never_comes_out_whole(claim: str, filler: int, points: list[int]) -> None:
    """The check fails only once the whole claim is there: wherever the deltas and the screen's
    own cuts fall (a long run without a sentence end forces cuts), the claim never goes out."""
    seen: list[str] = []
    target = claim.strip()
    screen = ReplyScreen(lambda text: "claim" if target in text else None, **ROOMY)
    text = OPENING + "x" * filler + target + " Cố lên."

    def feed_all() -> None:
        for piece in _cuts(text, points):
            seen.append(screen.feed(piece))
        seen.append(screen.flush())

    with pytest.raises(ReplyRejected):
        feed_all()
    assert target not in "".join(seen)
    assert screen.shown_text == "".join(seen)


@given(
    st.randoms(use_true_random=False),
    st.integers(0, 2 * MAX_HELD_CHARS),
    st.sampled_from(("x", "từ ", "Em thử nhé. ", "dòng\n")),
    st.lists(st.integers(0, 4 * MAX_HELD_CHARS), max_size=12),
)
def test_generated_markup_never_comes_out_whatever_the_cuts(
    rng: random.Random, filler: int, unit: str, points: list[int]
) -> None:
    """Markup of every form (``nemo_testing.corpora.markup``), however long its attributes and
    whether or not it is closed, after a filler that forces cuts at spaces, anywhere, at sentence
    ends or at line breaks: what comes out is plain text, and never holds the markup's opener."""
    piece = markup(rng)
    screen = ReplyScreen(lambda text: plain_text_problem("reply", text, ()), **ROOMY)
    text = OPENING + (unit * filler)[:filler] + piece.text + " Cố lên."
    try:
        for cut in _cuts(text, points):
            screen.feed(cut)
        screen.flush()
    except ReplyRejected:
        pass
    shown = screen.shown_text
    assert plain_text_problem("reply", shown, ()) is None
    assert fold_lookalikes(piece.opener) not in fold_lookalikes(shown)


def test_a_run_without_a_sentence_end_is_released_short_of_its_tail() -> None:
    screen = ReplyScreen(_accept, **ROOMY)
    words = "từ " * (MAX_HELD_CHARS // 3 + 1)
    released = screen.feed(words)
    assert released, "a long run is not held to the end"
    assert words.startswith(released)
    assert released.endswith(" ")
    assert len(words) - len(released) >= HOLD_BACK_CHARS


def test_a_run_with_no_space_is_cut_at_its_tail() -> None:
    screen = ReplyScreen(_accept, **ROOMY)
    assert screen.feed("x" * (MAX_HELD_CHARS - 1)) == ""
    assert screen.feed("x") == "x" * (MAX_HELD_CHARS - HOLD_BACK_CHARS)


@given(st.text(max_size=80), st.lists(st.integers(0, 80), max_size=6))
def test_hidden_characters_never_come_out(text: str, points: list[int]) -> None:
    screen = ReplyScreen(_accept, **ROOMY)
    for piece in _cuts(text, points):
        screen.feed(piece)
    screen.flush()
    shown = screen.shown_text
    assert all(char in "\n\t" or unicodedata.category(char)[0] != "C" for char in shown)
    assert not any(0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 for c in shown)
    assert not any(0xE0000 <= ord(c) <= 0xE0FFF or c in "\u200b\u200d\ufeff" for c in shown)


@given(st.integers(1, 50), st.integers(1, 20))
def test_a_reply_past_its_bound_stops_with_nothing_more_released(
    max_chars: int, delta_size: int
) -> None:
    screen = ReplyScreen(_accept, max_chars=max_chars, max_deltas=100_000)

    def feed_past_the_bound() -> None:
        for _ in range(max_chars + 1):
            screen.feed("a. " * delta_size)

    with pytest.raises(ReplyTooLong):
        feed_past_the_bound()
    assert len(screen.shown_text) <= max_chars


def test_more_deltas_than_tokens_stop_the_reply() -> None:
    screen = ReplyScreen(_accept, max_chars=100_000, max_deltas=3)
    for _ in range(3):
        screen.feed("a. ")
    with pytest.raises(ReplyTooLong):
        screen.feed("a. ")
    assert screen.shown_text == "a. " * 3
