"""The literal filter in front of the instruction scan never changes an answer: a text a pattern
matches always holds one of the literals the pattern needs. Checked on generated patterns and
texts, on texts generated to match each instruction pattern, and on every reading of the
labelled corpus; and the filter does skip texts that hold none of them."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_core.text import fold_lookalikes
from nemo_gateway.grounding import instructions
from nemo_gateway.grounding.literals import LiteralFilter, necessary_literals
from nemo_testing import corpora

_ALPHABET = "abc ,.:"
_WORDS = st.text(alphabet="abc", min_size=1, max_size=4).map(re.escape)
_CLASS = st.sampled_from(["[ab]", "[a-c]", "[^a]", r"\w", ".", r"\s", "[.,:]"])
_ZERO_WIDTH = st.sampled_from([r"\b", "^", "$", "(?=a)", "(?!b)", "(?<=c)", "(?<!a)"])


def _patterns() -> st.SearchStrategy[str]:
    """Regular expressions over a small alphabet, built from every construct the reading
    handles: literals, classes, anchors and lookarounds, groups, alternations and repeats."""
    atoms = st.one_of(_WORDS, _CLASS, _ZERO_WIDTH)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.lists(inner, min_size=1, max_size=4).map("".join),
            st.lists(inner, min_size=2, max_size=3).map(lambda b: f"(?:{'|'.join(b)})"),
            st.tuples(inner, st.sampled_from(["?", "*", "+", "{0,2}", "{1,3}", "{2}", "+?"])).map(
                lambda part: f"(?:{part[0]}){part[1]}"
            ),
            inner.map(lambda part: f"({part})"),
            inner.map(lambda part: f"(?>{part})"),
        )

    return st.recursive(atoms, extend, max_leaves=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_patterns(), texts=st.lists(st.text(alphabet=_ALPHABET, max_size=14), max_size=6))
def test_a_text_a_generated_pattern_matches_holds_one_of_its_literals(
    pattern: str, texts: list[str]
) -> None:
    needed = necessary_literals(pattern)
    compiled = re.compile(pattern)
    for text in texts:
        if compiled.search(text) and needed is not None:
            assert any(literal in text for literal in needed), (pattern, text, needed)
        if compiled.search(text):
            assert LiteralFilter.of([pattern]).may_match(text), (pattern, text)


@pytest.mark.parametrize("pattern", instructions.INSTRUCTION_PATTERNS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_text_an_instruction_pattern_matches_passes_the_filter(
    pattern: str, data: st.DataObject
) -> None:
    text = data.draw(st.from_regex(pattern))
    single = LiteralFilter.of([pattern])
    assert single.literals, pattern  # every instruction pattern needs some fixed text
    if re.search(pattern, text):
        assert single.may_match(text), (pattern, text)
        # Padded on both sides, short or long (the two ways the filter searches).
        for padded in (f"x {text} y", f"{'z ' * 40}{text}{' w' * 40}"):
            assert instructions._MAY_MATCH(padded), (pattern, padded)


def test_the_filter_lets_every_flagged_reading_of_the_corpus_through() -> None:
    flagged = 0
    for row in corpora.load("instructions"):
        folded = " ".join(fold_lookalikes(row.text).split())
        for reading in (folded, *instructions._leet_readings(folded)):
            if instructions._COMPILED.search(reading):
                flagged += 1
                assert instructions._MAY_MATCH(reading), reading
    assert flagged >= 150


def test_a_text_without_any_needed_literal_is_not_scanned() -> None:
    item = LiteralFilter.of([r"\b(?:ignore|forget)\b.{0,20}\brules\b", r"\byou are now\b"])
    assert item.literals == ("forget", "ignore", "you are now")
    for text in ("", "x", "x + 3 = 5", "khai trien (x + 3)2", "o" * 100):
        assert not item.may_match(text)
    for text in ("please ignore", "you are now ready", f"{'a' * 200} forget"):
        assert item.may_match(text)


@pytest.mark.parametrize(
    "pattern", [r"a*", r"(?i)ignore", r"(?:ignore|.)", r"(?i:ignore)", r"\w+", r"x?"]
)
def test_a_pattern_that_may_match_without_fixed_text_filters_nothing(pattern: str) -> None:
    assert LiteralFilter.of([pattern, "rules"]).may_match("")


def test_a_part_that_ignores_case_needs_nothing_of_its_own() -> None:
    assert LiteralFilter.of([r"(?i:ignore) rules?"]).literals == (" rule",)
    assert re.search(r"(?i:ignore) rules?", "IGNORE rule")
