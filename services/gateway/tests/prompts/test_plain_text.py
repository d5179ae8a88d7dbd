"""Learner-facing text is plain text that names nobody: generated markup and every shape of the
platform's keys are refused in every spelling, and ordinary teaching text never is.

- Markup comes from the generator of ``nemo_testing.corpora.markup`` (element names, forms,
  separators, long attributes, unclosed tags, bracket spellings), drawn by hypothesis.
- Keys are drawn in each shape of ``identifier_shapes.SHAPES`` and read from the seeded database
  (every learner, user and family key), and the key shapes are held to ``nemo_core``'s key rule.
- The ordinary-text corpus and the benign rows of the labelled corpora raise no alarm.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_core.db import connect
from nemo_core.identifiers import is_key
from nemo_gateway.prompts.common import plain_text_problem
from nemo_gateway.prompts.identifier_shapes import SHAPES, Shape
from nemo_testing import corpora
from nemo_testing.corpora.markup import markup
from nemo_testing.corpora.ordinary import ordinary_texts

FRAMES = (
    "{}",
    "Em xem {} nhé.",
    "Bài 3: {}\nLàm từng bước.",
    "Hint: try {} first",
    "(a + b)² = a² + 2ab + b², {}",
)


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _look_alike(text: str) -> str:
    """Latin letters as their Cyrillic look-alikes, hyphens as en dashes."""
    latin, cyrillic = (
        "aeopcxAEOPCX-",
        "\u0430\u0435\u043e\u0440\u0441\u0445\u0410\u0415\u041e\u0420\u0421\u0425\u2013",
    )
    return text.translate(str.maketrans(latin, cyrillic))


def _invisible_inside(text: str) -> str:
    return "\u200b".join(text)


Spelling = Callable[[str], str]
SPELLINGS: tuple[Spelling, ...] = (
    str,
    str.upper,
    str.lower,
    _full_width,
    _look_alike,
    _invisible_inside,
)


def _refused(text: str) -> bool:
    return plain_text_problem("text", text, ()) is not None


@given(st.randoms(use_true_random=False), st.sampled_from(FRAMES), st.sampled_from(SPELLINGS))
def test_generated_markup_is_refused_in_every_spelling(
    rng: random.Random, frame: str, spelling: Spelling
) -> None:
    piece = markup(rng)
    assert _refused(frame.format(spelling(piece.text))), piece
    assert _refused(frame.format(spelling(piece.opener))), piece


@pytest.mark.parametrize(
    "text",
    ["<svg/onload=alert(1)>", f'<img src=x title="{"ô" * 200}" onerror=alert(1)>',
     "<img src=x onerror=alert(1)//"],
    ids=["svg-slash", "long-title", "unclosed"],
)  # fmt: skip
def test_the_forms_the_audit_found_are_refused(text: str) -> None:
    assert _refused(f"Em xem {text} nhé.")


ORDINARY = (
    *ordinary_texts(),
    *(row.text for name in corpora.CORPORA for row in corpora.load(name) if row.label == "benign"),
)


def test_ordinary_teaching_text_raises_no_alarm() -> None:
    assert len(ORDINARY) > 1400
    assert [text for text in ORDINARY if _refused(text)] == []


# Keys.

_ALNUM = string.ascii_uppercase + string.digits


def _mixed(size: int) -> st.SearchStrategy[str]:
    """Letters and digits, at least one of each."""
    return st.text(_ALNUM, min_size=size, max_size=size + 20).filter(
        lambda s: any(c.isdigit() for c in s) and any(c.isalpha() for c in s)
    )


DEMO_KEYS = st.builds(
    "{}-{:04d}-{}".format,
    st.sampled_from(string.ascii_uppercase),
    st.integers(0, 9999),
    st.text(_ALNUM, min_size=1, max_size=6),
)
UUIDS = st.uuids().map(str) | st.uuids().map(lambda u: u.hex)
PREFIXED = st.builds(
    "{}{}{}".format,
    st.text(string.ascii_lowercase, min_size=2, max_size=8),
    st.sampled_from("_-"),
    _mixed(12),
)
RANDOM_IDS = _mixed(16)
KEYS = DEMO_KEYS | UUIDS | PREFIXED | RANDOM_IDS


@given(KEYS, st.sampled_from(FRAMES), st.sampled_from(SPELLINGS))
def test_every_key_shape_is_refused_in_every_spelling(
    key: str, frame: str, spelling: Spelling
) -> None:
    assert _refused(frame.format(spelling(key))), key


async def test_every_seeded_learner_user_and_family_key_is_refused(owner_dsn: str) -> None:
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT id FROM learning.learners UNION SELECT id FROM learning.users"
            " UNION SELECT id FROM learning.families"
        )
    finally:
        await conn.close()
    keys = [row["id"] for row in rows]
    assert len(keys) > 20
    for key in keys:
        for spelling in SPELLINGS:
            assert _refused(f"Mã của em là {spelling(key)}."), (key, spelling)


@given(st.text("abcxyz0123456789-_.:", max_size=150))
def test_what_a_key_shape_finds_is_a_key_by_the_platform_rule(text: str) -> None:
    for shape in SHAPES:
        if shape.key:
            for match in re.finditer(shape.pattern, text):
                assert is_key(match.group()), (shape.name, match.group())


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.name)
def test_each_shape_finds_its_example(shape: Shape) -> None:
    assert _refused(f"Mã: {shape.example}.")
