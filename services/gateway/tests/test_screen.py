"""The sentence screen releases only checked, finished sentences, however the deltas are cut."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gateway.screen import MAX_HELD_CHARS, ReplyRejected, SentenceScreen
from nemo_testing import corpora

CLAIMS = [row.text for row in corpora.load("score_claims") if row.label == "claim"]
OPENING = "Em làm từng bước nhé. "


def _cuts(text: str, points: list[int]) -> list[str]:
    edges = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    return [text[a:b] for a, b in itertools.pairwise(edges)]


def _accept(text: str) -> str | None:
    return None


@given(st.text(alphabet="ab .!?\n", max_size=60), st.lists(st.integers(0, 60), max_size=8))
def test_accepted_text_comes_out_whole_in_order(text: str, points: list[int]) -> None:
    screen = SentenceScreen(_accept)
    released = [screen.feed(piece) for piece in _cuts(text, points)]
    assert "".join(released) + screen.flush() == text


@given(st.sampled_from(CLAIMS), st.lists(st.integers(0, 200), max_size=8))
def test_a_rejected_sentence_never_comes_out_in_any_part(claim: str, points: list[int]) -> None:
    seen: list[str] = []
    screen = SentenceScreen(lambda text: "claim" if claim.strip() in text else None)
    pieces = _cuts(OPENING + claim + " Cố lên.", points)

    def feed_all() -> None:
        for piece in pieces:
            seen.append(screen.feed(piece))
        screen.flush()

    with pytest.raises(ReplyRejected):
        feed_all()
    assert "".join(seen) in {"", OPENING}
    assert screen.shown_text == "".join(seen)


def test_a_run_without_a_sentence_end_is_not_held_forever() -> None:
    screen = SentenceScreen(_accept)
    assert screen.feed("x" * (MAX_HELD_CHARS - 1)) == ""
    assert screen.feed("xx") == "x" * (MAX_HELD_CHARS + 1)
