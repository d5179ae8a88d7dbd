"""JSON extraction: strict (fences allowed), then the brace slice, then the backslash repair."""

from __future__ import annotations

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
