"""The per-sentence citation check, including the four worked examples of the grounded-answer
guide with their exact results."""

from __future__ import annotations

import pytest

from nemo_gateway.grounding.citations import CitationReport, check_citations


@pytest.mark.parametrize(
    ("answer", "sources", "expected"),
    [
        # Two points, both cited.
        (
            "Nhân viên chính thức được làm việc từ xa tối đa 2 ngày mỗi tuần [1]. "
            "Nhân viên thử việc cần quản lý trực tiếp phê duyệt từng lần [2].",
            2,
            CitationReport(valid=(1, 2), invalid=(), uncited_sentences=0, sentences=2),
        ),
        # A citation of a source that was never sent.
        (
            "Chính sách hoàn tiền áp dụng trong 30 ngày [5].",
            3,
            CitationReport(valid=(), invalid=(5,), uncited_sentences=0, sentences=1),
        ),
        # No citation at all.
        (
            "Nhân viên được làm việc từ xa khi cần.",
            3,
            CitationReport(valid=(), invalid=(), uncited_sentences=1, sentences=1),
        ),
        # Two cited points, then a sentence no source supports.
        (
            "Nhân viên chính thức được làm việc từ xa tối đa 2 ngày mỗi tuần [1]. "
            "Nhân viên thử việc cần quản lý trực tiếp phê duyệt từng lần [2]. "
            "Được rà soát hằng năm.",
            2,
            CitationReport(valid=(1, 2), invalid=(), uncited_sentences=1, sentences=3),
        ),
    ],
)
def test_the_four_worked_examples(answer: str, sources: int, expected: CitationReport) -> None:
    assert check_citations(answer, range(1, sources + 1)) == expected


def test_sentences_split_after_any_terminal_mark_and_citations_are_counted_once() -> None:
    report = check_citations("Có phải không? Có [1][1]! Đúng vậy [0].  ", range(1, 3))
    assert report == CitationReport(valid=(1,), invalid=(0,), uncited_sentences=1, sentences=3)


def test_an_empty_answer_has_no_sentences() -> None:
    assert check_citations("   ", range(1, 4)) == CitationReport((), (), 0, 0)


def test_a_bracketed_run_of_digits_too_long_for_a_source_number_is_no_citation() -> None:
    # Thousands of digits would not even convert to an integer; no prompt has that many sources.
    absurd = "[" + "9" * 4500 + "]"
    assert check_citations(f"Đúng {absurd}.", range(1, 3)) == CitationReport((), (), 1, 1)
    assert check_citations("Có [123456]. Không [1234567] [2].", range(1, 3)) == CitationReport(
        valid=(2,), invalid=(123456,), uncited_sentences=0, sentences=2
    )


def test_a_withheld_source_is_not_citable() -> None:
    report = check_citations("Đúng [1]. Sai [2].", {1, 3})
    assert report == CitationReport(valid=(1,), invalid=(2,), uncited_sentences=0, sentences=2)
