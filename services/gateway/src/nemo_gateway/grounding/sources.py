"""From retrieved passages to the numbered sources of a grounded-answer prompt.

1. A passage repeated (same document and chunk) is kept once, its stronger copy.
2. Passages are chosen strongest first while they fit the token budget, each at the cost of the
   whole block it becomes in the prompt (header, title and id included); one that does not fit
   is left out rather than cut mid-sentence, and the weaker ones after it still get their turn.
   The budget is applied before merging, so a strong passage never vanishes with a long weak
   neighbour it would have been merged with.
3. Adjacent chosen passages of one document (chunk k and k+1) are merged, so the model reads
   them as the author wrote them; the merged passage keeps the stronger score and costs no more
   than its parts did.
4. The strongest go first (models overlook what sits in the middle of a long context), numbered
   from 1, each flagged when it reads like instructions or carries one of the prompts' data tags
   (which could end the data block it is put in).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import groupby

from nemo_gateway.grounding.carriers import suspicious


@dataclass(frozen=True, slots=True)
class Passage:
    """A passage as retrieved or as given by the caller."""

    document_id: str
    chunk_index: int
    title: str
    text: str
    score: float


@dataclass(frozen=True, slots=True)
class NumberedSource:
    """A passage as numbered in a grounded-answer prompt."""

    number: int
    document_id: str
    title: str
    text: str
    score: float
    flagged_as_instruction: bool


def merge_adjacent(passages: Iterable[Passage]) -> list[Passage]:
    """Merge runs of consecutive chunks of one document; a repeated chunk is kept once."""
    merged: list[Passage] = []
    ordered = sorted(passages, key=lambda p: (p.document_id, p.chunk_index, -p.score))
    for _, group in groupby(ordered, key=lambda p: p.document_id):
        run: list[Passage] = []
        for passage in group:
            if run and passage.chunk_index == run[-1].chunk_index:
                continue  # the same chunk twice: the stronger copy came first
            if run and passage.chunk_index != run[-1].chunk_index + 1:
                merged.append(_join(run))
                run = []
            run.append(passage)
        merged.append(_join(run))
    return merged


def _join(run: list[Passage]) -> Passage:
    first = run[0]
    return Passage(
        document_id=first.document_id,
        chunk_index=first.chunk_index,
        title=first.title,
        text="\n".join(passage.text.strip() for passage in run),
        score=max(passage.score for passage in run),
    )


def _suspicious(passage: Passage) -> bool:
    """Whether the passage gives orders or tries to step out of its data block (the guard of
    every carrier, :mod:`nemo_gateway.grounding.carriers`)."""
    return suspicious(f"{passage.title}\n{passage.text}", passage.document_id)


def _distinct(passages: Iterable[Passage]) -> list[Passage]:
    """Each (document, chunk) once, its stronger copy, strongest first."""
    strongest: dict[tuple[str, int], Passage] = {}
    for passage in passages:
        key = (passage.document_id, passage.chunk_index)
        if key not in strongest or passage.score > strongest[key].score:
            strongest[key] = passage
    return sorted(strongest.values(), key=lambda p: (-p.score, p.document_id, p.chunk_index))


def number_sources(
    passages: Iterable[Passage], token_budget: int, cost: Callable[[Passage], int]
) -> tuple[NumberedSource, ...]:
    """Choose strongest first within ``token_budget`` (each passage at ``cost``), merge the
    adjacent chosen ones, order strongest first and number from 1."""
    chosen: list[Passage] = []
    used = 0
    for passage in _distinct(passages):
        price = cost(passage)
        if used + price <= token_budget:
            used += price
            chosen.append(passage)
    ordered = sorted(merge_adjacent(chosen), key=lambda p: (-p.score, p.document_id, p.chunk_index))
    return tuple(
        NumberedSource(
            number=number,
            document_id=passage.document_id,
            title=passage.title,
            text=passage.text,
            score=passage.score,
            flagged_as_instruction=_suspicious(passage),
        )
        for number, passage in enumerate(ordered, start=1)
    )
