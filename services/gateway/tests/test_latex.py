"""The LaTeX commands JSON would read as control characters are detected, nothing else."""

from __future__ import annotations

from nemo_gateway.structured.latex import ambiguous_latex


def test_commands_read_as_control_characters_are_found() -> None:
    source = r'{"t": "\frac{a}{b} + \theta - \times \beta \neq \rho \text{x}"}'
    assert ambiguous_latex(source) == [
        "\\beta", "\\frac", "\\neq", "\\rho", "\\text", "\\theta", "\\times",
    ]  # fmt: skip


def test_doubled_backslashes_and_ordinary_newlines_are_not_flagged() -> None:
    assert ambiguous_latex(r'{"t": "\\frac{a}{b} and \\theta"}') == []
    # A newline before a word is just a newline, in English and in Vietnamese.
    assert ambiguous_latex(r'{"t": "Dòng một\nem làm bài\nto do\tend\nnuôi"}') == []


def test_an_odd_run_of_backslashes_leaves_the_last_one_unescaped() -> None:
    assert ambiguous_latex(r'{"t": "\\\frac"}') == ["\\frac"]


def test_a_line_break_before_a_list_item_or_a_definition_is_not_a_relation() -> None:
    source = (
        r'{"t": "Các lựa chọn:\nd) 7\ne) 8 — trùng ý với d)\ni) một\ni. hai\ne = 2,7'
        r'\ne: hằng số\ne"}'
    )
    assert ambiguous_latex(source) == []


def test_relations_with_an_operand_and_symbols_anywhere_are_still_found() -> None:
    source = r'{"t": "x \ne 0, a \ni b, x \to +\infty, f(\nu) = \nu. \frac{1}{2} \theta \neq b"}'
    assert ambiguous_latex(source) == [
        "\\frac", "\\ne", "\\neq", "\\ni", "\\nu", "\\theta", "\\to",
    ]  # fmt: skip
