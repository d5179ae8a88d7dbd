"""From retrieved passages to the numbered sources of a grounded-answer prompt.

1. Adjacent passages of one document (chunk k and k+1) are merged, so the model reads them as
   the author wrote them; the merged passage keeps the stronger score.
2. The strongest passages go first: models overlook what sits in the middle of a long context.
3. Passages are added in that order while they fit the token budget; one that does not fit is
   left out rather than cut mid-sentence, and the weaker ones after it still get their turn, so
   one long passage cannot crowd out every other.
4. Each source is numbered from 1 in that order and flagged when it reads like instructions or
   carries one of the prompts' data tags (which could end the data block it is put in).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby

from nemo_gateway.grounding.instructions import looks_like_instructions
from nemo_gateway.prompts.spec import NumberedSource
from nemo_gateway.prompts.tags import has_data_tag

# Vietnamese runs at roughly three characters per token; erring high keeps the budget honest.
CHARS_PER_TOKEN = 3


@dataclass(frozen=True, slots=True)
class Passage:
    """A passage as retrieved or as given by the caller."""

    document_id: str
    chunk_index: int
    title: str
    text: str
    score: float


def estimate_tokens(text: str) -> int:
    """A conservative token estimate."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


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
    """Whether the passage gives orders or tries to step out of its data block."""
    return looks_like_instructions(passage.text) or any(
        has_data_tag(field) for field in (passage.text, passage.title, passage.document_id)
    )


def number_sources(passages: Iterable[Passage], token_budget: int) -> tuple[NumberedSource, ...]:
    """Merge, order strongest first, fit into ``token_budget`` and number from 1."""
    ordered = sorted(
        merge_adjacent(passages), key=lambda p: (-p.score, p.document_id, p.chunk_index)
    )
    sources: list[NumberedSource] = []
    used = 0
    for passage in ordered:
        cost = estimate_tokens(passage.title) + estimate_tokens(passage.text)
        if used + cost > token_budget:
            continue
        used += cost
        sources.append(
            NumberedSource(
                number=len(sources) + 1,
                document_id=passage.document_id,
                title=passage.title,
                text=passage.text,
                score=passage.score,
                flagged_as_instruction=_suspicious(passage),
            )
        )
    return tuple(sources)
