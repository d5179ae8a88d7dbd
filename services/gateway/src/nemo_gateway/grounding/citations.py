"""The per-sentence citation check of a grounded answer.

An answer that cites something somewhere is not the same as an answer whose every sentence is
supported: counting uncited sentences is what catches a sentence added without a source.

A citation is a bracketed number of at most :data:`MAX_CITATION_DIGITS` digits: no prompt has
that many sources, and a longer run of digits (``[9999…]``) is text, not a citation, so it is
never turned into an integer.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

MAX_CITATION_DIGITS = 6
_CITATION = re.compile(rf"\[(\d{{1,{MAX_CITATION_DIGITS}}})\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class CitationReport:
    """Valid and non-existent citation numbers (ascending), uncited sentences, all sentences."""

    valid: tuple[int, ...]
    invalid: tuple[int, ...]
    uncited_sentences: int
    sentences: int


def uncited_sentences(answer: str) -> list[str]:
    """The sentences of ``answer`` that cite nothing, in order."""
    return [sentence for sentence in split_sentences(answer) if not _CITATION.search(sentence)]


def split_sentences(answer: str) -> list[str]:
    """Sentences of ``answer``, split after ``.``, ``!`` or ``?`` followed by whitespace."""
    return [sentence for sentence in _SENTENCE_END.split(answer.strip()) if sentence]


def check_citations(answer: str, citable: Collection[int]) -> CitationReport:
    """Which citations of ``answer`` name one of the ``citable`` source numbers (a withheld
    source is not citable), and how many sentences cite nothing."""
    used = {int(number) for number in _CITATION.findall(answer)}
    valid = {number for number in used if number in citable}
    sentences = split_sentences(answer)
    uncited = len(uncited_sentences(answer))
    return CitationReport(
        valid=tuple(sorted(valid)),
        invalid=tuple(sorted(used - valid)),
        uncited_sentences=uncited,
        sentences=len(sentences),
    )
