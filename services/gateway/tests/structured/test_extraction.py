"""JSON extraction: strict (fences allowed), then the brace slice, then the backslash repair."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gateway.structured.extraction import ParseFailure, Step, extract_json, repair_backslashes


def test_strict_json_and_fenced_json_are_the_strict_step() -> None:
    assert extract_json('{"a": 1}', "object").step is Step.STRICT
    fenced = extract_json('Here you go:\n```json\n{"a": [1, 2]}\n```\nDone.', "object")
    assert (fenced.value, fenced.step) == ({"a": [1, 2]}, Step.STRICT)


def test_prose_around_unfenced_json_needs_the_slice() -> None:
    parsed = extract_json('Sure! {"a": {"b": 2}} Hope it helps.', "object")
    assert (parsed.value, parsed.step) == ({"a": {"b": 2}}, Step.BRACE_SLICE)


def test_the_slice_follows_the_output_models_top_level_type() -> None:
    parsed = extract_json('The list: [{"a": 1}, {"a": 2}] end', "array")
    assert (parsed.value, parsed.step) == ([{"a": 1}, {"a": 2}], Step.BRACE_SLICE)
    with pytest.raises(ParseFailure):
        extract_json('[{"a": 1}, {"a": 2}]', "object")


def test_the_repair_doubles_only_backslashes_that_start_no_json_escape() -> None:
    assert repair_backslashes(r'{"t": "\Theta \log \n \" \u00e9 \\ \/"}') == (
        r'{"t": "\\Theta \\log \n \" \u00e9 \\ \/"}'
    )
    parsed = extract_json(r'{"t": "độ phức tạp \Theta(n \log n)"}', "object")
    assert (parsed.value, parsed.step) == (
        {"t": "độ phức tạp \\Theta(n \\log n)"},
        Step.BACKSLASH_REPAIR,
    )


def test_failure_is_an_explicit_error_never_an_empty_value() -> None:
    for text in ("", "no json here", '{"a": ', "{}}{", '{"a": 1'):
        with pytest.raises(ParseFailure):
            extract_json(text, "object")


def test_valid_json_escapes_in_latex_parse_into_control_characters() -> None:
    # Documented data loss: \f and \t are valid escapes, so the text parses "successfully".
    # The pipeline catches this case with the LaTeX check and re-asks (see test_latex.py).
    parsed = extract_json(r'{"t": "\frac{1}{2} và \theta"}', "object")
    assert parsed.value == {"t": "\x0crac{1}{2} và \theta"}
    assert parsed.step is Step.STRICT


_PROSE = st.text(alphabet=st.sampled_from("{}[] abcđê:\n\"'\\"), max_size=40).map(
    lambda text: text.replace("```", "")
)


@given(before=_PROSE, after=_PROSE)
def test_the_slice_and_the_repair_work_on_the_fenced_body(before: str, after: str) -> None:
    # Prose around the fence, braces and backslashes included, is never part of the JSON.
    sliced = extract_json(f'{before}\n```json\nĐây: {{"a": [1]}} hết\n```\n{after}', "object")
    assert (sliced.value, sliced.step) == ({"a": [1]}, Step.BRACE_SLICE)
    repaired = extract_json(f'{before}\n```\n{{"t": "\\Theta"}}\n```\n{after}', "object")
    assert (repaired.value, repaired.step) == ({"t": "\\Theta"}, Step.BACKSLASH_REPAIR)


# What touches the JSON in the prose is never part of it, whatever it is.

_NO_BRACKETS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="{}[]`"), max_size=12
)
_SCALARS = st.none() | st.booleans() | st.integers() | st.text(alphabet='ab đ}]\\"\n', max_size=6)
_OBJECTS = st.dictionaries(
    st.text(alphabet="abcđ }", max_size=4),
    st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=6),
    min_size=1,
    max_size=3,
)


@given(value=_OBJECTS, before=_NO_BRACKETS, after=_NO_BRACKETS)
def test_json_in_prose_is_sliced_from_its_first_opener_to_its_last_closer(
    value: dict[str, object], before: str, after: str
) -> None:
    text = json.dumps(value, ensure_ascii=False)
    parsed = extract_json(f"{before}{text}{after}", "object")
    assert parsed.value == value
    if parsed.step is Step.BRACE_SLICE:
        assert parsed.source == text
    listed = extract_json(f"{before}[{text}]{after}", "array")
    assert listed.value == [value]


def test_punctuation_right_after_the_closer_is_prose() -> None:
    for after in (".", "!", ")", "”", "…", "đ", "\\"):
        parsed = extract_json(f'Kết quả: {{"a": 1}}{after}', "object")
        assert (parsed.value, parsed.step, parsed.source) == (
            {"a": 1},
            Step.BRACE_SLICE,
            '{"a": 1}',
        )
        listed = extract_json(f"Danh sách [1, 2]{after}", "array")
        assert (listed.value, listed.source) == ([1, 2], "[1, 2]")


# A failure says what is wrong: the pipeline sends its text back to the model in the re-ask.


def test_an_answer_without_the_top_level_brackets_says_so() -> None:
    for text, top, brackets in (
        ("Xin lỗi, tôi không biết.", "object", "{...}"),
        ("đáp án } rồi {", "object", "{...}"),  # a closer before the opener is no object
        ('{"a": 1}', "array", "[...]"),
        ("] và [", "array", "[...]"),
    ):
        with pytest.raises(ParseFailure) as raised:
            extract_json(text, top)  # type: ignore[arg-type]
        assert str(raised.value) == f"no {brackets} in the answer", text


def test_invalid_json_is_reported_with_where_the_parser_stopped() -> None:
    with pytest.raises(ParseFailure) as raised:
        extract_json('Đây: {"a": 1,}', "object")
    assert str(raised.value).startswith("not valid JSON: ")
    assert "line 1 column" in str(raised.value)


def test_json_nested_past_the_parsers_limit_is_a_failure_that_says_so() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ParseFailure) as raised:
        extract_json(deep, "array")
    assert str(raised.value) == "the JSON is nested too deeply"


def test_the_steps_are_named_as_the_run_record_names_its_reason() -> None:
    # run.proto: the reason of a repaired run is the name of the last step it needed.
    assert (Step.BRACE_SLICE.value, Step.BACKSLASH_REPAIR.value) == (
        "BRACE_SLICE",
        "BACKSLASH_REPAIR",
    )
