"""LaTeX that JSON would read as control characters is found; line breaks before words are not.

The commands come from maintained lists (``latex_sources``), never from the gateway's own list;
the ordinary text comes from the seeded curriculum and the project's own documentation.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemo_gateway.structured.latex import (
    N_COMMANDS,
    PROSE_WORDS,
    ambiguous_latex,
    control_characters,
)
from nemo_ops.seed_data import knowledge
from services.gateway.tests.latex_sources import N_COMMANDS_FILE, all_commands, render_n_commands

ESCAPE_LETTERS = "bfnrt"
CORPUS = sorted(name for name in all_commands() if name[0] in ESCAPE_LETTERS)
_ROOT = Path(__file__).resolve().parents[4]


def _prose_lines() -> list[str]:
    """Lines a model would write as text: seeded knowledge titles and descriptions (Vietnamese)
    and the prose lines of the docs (English), without markup."""
    lines = [str(row[1]) for row in knowledge._NODES] + [str(row[6]) for row in knowledge._NODES]
    for path in sorted((_ROOT / "docs").rglob("*.md")):
        for line in path.read_text(encoding="utf-8").splitlines():
            text = line.strip()
            if re.fullmatch(r"[A-Za-zÀ-ỹ][A-Za-zÀ-ỹ ,.;:'()-]{20,}", text):
                lines.append(text)
    return lines


PROSE = _prose_lines()
#: Relations whose operand is a product or a segment ("\\nless", "\\nmid"): a line starting
#: with such a word is read as the command by design (latex.PROSE_WORDS says why).
RELATION_WORDS = frozenset(name[1:] for name in N_COMMANDS if name[1:] not in PROSE_WORDS)
WORDS = sorted({word for line in PROSE for word in re.findall(r"[^\W\d_]+", line)} - RELATION_WORDS)


def test_the_corpus_is_large_and_covers_every_escape_letter() -> None:
    assert len(CORPUS) >= 300
    assert {name[0] for name in CORPUS} == set(ESCAPE_LETTERS)
    assert len(PROSE) >= 100
    assert sum(1 for word in WORDS if word.startswith("n")) >= 20


def test_the_n_list_is_what_the_pinned_lists_give() -> None:
    assert N_COMMANDS_FILE.read_text(encoding="utf-8") == render_n_commands()


@pytest.mark.parametrize("name", CORPUS)
def test_every_command_with_one_backslash_is_found_or_decodes_to_a_control_character(
    name: str,
) -> None:
    for written in (f"\\{name} x", f"\\{name}{{a}}", f"a \\{name} b = 0"):
        source = json.dumps({"t": "Xét " + written}).replace("\\\\", "\\")
        found = ambiguous_latex(source)
        decoded = json.loads(source)
        assert found == [f"\\{name}"] or control_characters(decoded), written


@pytest.mark.parametrize("name", CORPUS)
def test_every_command_with_doubled_backslashes_is_left_alone(name: str) -> None:
    source = json.dumps({"t": f"Xét \\{name} x và \\{name}{{a}}"})
    assert ambiguous_latex(source) == []
    assert control_characters(json.loads(source)) == []


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from(PROSE), min_size=2, max_size=5),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
)
def test_line_breaks_before_words_are_ordinary_text(lines: list[str], starts: list[str]) -> None:
    # Every line after the first may start with any word of the corpus, "n..." words included.
    text = "\n".join(
        line if index == 0 else f"{starts[index % len(starts)]} {line}"
        for index, line in enumerate(lines)
    )
    source = json.dumps({"t": text}, ensure_ascii=False)
    assert ambiguous_latex(source) == []
    assert control_characters(json.loads(source)) == []


def test_a_line_starting_with_a_relation_word_is_read_as_the_relation() -> None:
    assert {"less", "mid", "parallel"} <= RELATION_WORDS
    assert ambiguous_latex(json.dumps({"t": "a\nless b"})) == ["\\nless"]


def test_an_odd_run_of_backslashes_leaves_the_last_one_unescaped() -> None:
    assert ambiguous_latex(r'{"t": "\\\frac"}') == ["\\frac"]
    assert ambiguous_latex(r'{"t": "\\\\frac"}') == []


def test_a_line_break_before_a_list_item_or_a_definition_is_not_a_relation() -> None:
    source = (
        r'{"t": "Các lựa chọn:\nd) 7\ne) 8 — trùng ý với d)\ni) một\ni. hai\ne = 2,7'
        r'\ne: hằng số\ne"}'
    )
    assert ambiguous_latex(source) == []


def test_relations_with_an_operand_and_symbols_anywhere_are_found() -> None:
    source = r'{"t": "x \ne 0, a \ni b, f(\nu) = \nu. \nexists y, \nleq 3"}'
    assert ambiguous_latex(source) == ["\\ne", "\\nexists", "\\ni", "\\nleq", "\\nu"]


def test_a_line_break_then_a_vietnamese_word_with_diacritics_is_text() -> None:
    # "nu" and "ne" are commands, but a letter of another script continues them.
    assert ambiguous_latex(r'{"t": "một\nuôi\nêm"}') == []


@pytest.mark.parametrize("char", ["\f", "\b", "\t", "\r", "\x00", "\x1b", "\x7f", "\x85"])
def test_control_characters_but_line_breaks_are_reported(char: str) -> None:
    assert control_characters({"a": ["x", {"b": f"y{char}z"}]}) == [f"U+{ord(char):04X}"]


def test_line_breaks_in_either_convention_are_not_control_characters() -> None:
    assert control_characters({"a": "một\nhai\r\nba"}) == []


def test_a_short_relation_before_a_word_is_a_line_break_before_that_word() -> None:
    # "\nin" and "\nis" are relations, but "in" and "is" open many English lines.
    source = r'{"t": "Sáng\nin the morning\nis fine\ne là hằng số\nin A result\nin A"}'
    assert ambiguous_latex(source) == ["\\nin"]
    prose = r'{"t": "Sáng\nin the morning\nis fine\ne là hằng số\ni và j là hai chỉ số"}'
    assert ambiguous_latex(prose) == []
    assert ambiguous_latex(r'{"t": "x \nin A, y \ni b."}') == ["\\ni", "\\nin"]


def test_a_quantifier_or_set_relation_that_is_an_english_word_opens_a_line_of_prose() -> None:
    # "exists" and "subset" open English lines; as LaTeX they take a variable, a set, a symbol
    # or a command, one letter or one character.
    prose = r'{"t": "A solution\nexists in every case\nsubset of the plan\nexists."}'
    assert ambiguous_latex(prose) == []
    latex = r'{"t": "\nexists x \in A, B \nsubset C, \nexists \alpha, \nsubset(A)"}'
    assert ambiguous_latex(latex) == ["\\nexists", "\\nsubset"]


def test_a_relation_with_nothing_after_it_is_a_word_that_ends_a_clause() -> None:
    # "nothing\nless." is prose; as LaTeX, "\nless" must have a right operand.
    assert ambiguous_latex(r'{"t": "Nothing more, nothing\nless. Then\nmid), then\nsim;"}') == []
    assert ambiguous_latex(r'{"t": "a \nless b, c \nsim d"}') == ["\\nless", "\\nsim"]


def test_a_relation_longer_than_a_short_word_takes_the_word_after_it_as_its_operand() -> None:
    # "\nmid" (does not divide) and "\nleq" take products as operands: a word after them is
    # not read as prose.
    assert ambiguous_latex(r'{"t": "a \nmid bc, x \nleq ab"}') == ["\\nleq", "\\nmid"]


def test_every_command_is_found_after_line_breaks_and_list_items_before_it() -> None:
    source = r'{"t": "Dòng một\nhai: x \ne 0\nd) 7\ne) 8 và y \nleq 3"}'
    assert ambiguous_latex(source) == ["\\ne", "\\nleq"]
