"""Whether knowledge matches a question: the bar retrieved hits must clear to become sources,
and the test a source must pass before the deterministic answer may quote it.

- A retrieved hit is kept when its search score reaches :data:`MIN_SEARCH_SCORE` and at least
  :data:`MIN_SHARE_OF_BEST` of the best hit's score. The context service scores a hit in [0, 3]
  (query coverage + title coverage + a phrase bonus), so a node that shares one word of three
  with the question ("Xác suất thực nghiệm" for "hằng đẳng thức", about 0.6) stays out.
- A source matches a question when its title and text hold at least
  :data:`MIN_QUESTION_COVERAGE` of the question's words (folded, as the search folds them).
  The deterministic answer quotes only sources that match; with none, it says the documents do
  not cover the question rather than claim a coverage it lacks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from nemo_core.text import is_significant, words
from nemo_protos.context.v1 import knowledge_pb2

MIN_SEARCH_SCORE = 1.0
MIN_SHARE_OF_BEST = 0.5
MIN_QUESTION_COVERAGE = 0.5


def significant_words(text: str) -> set[str]:
    """Folded words of ``text``; single letters (variables, particles) left out."""
    return {word for word in words(text) if is_significant(word)}


def relevant_hits(hits: Sequence[knowledge_pb2.KnowledgeHit]) -> list[knowledge_pb2.KnowledgeHit]:
    """The hits that clear the bar, in their order; a hit without a finite score clears none."""
    hits = [hit for hit in hits if math.isfinite(hit.score)]
    if not hits:
        return []
    bar = max(MIN_SEARCH_SCORE, MIN_SHARE_OF_BEST * max(hit.score for hit in hits))
    return [hit for hit in hits if hit.score >= bar]


def matches(question: str, title: str, text: str) -> bool:
    """Whether a source's title and text hold enough of the question's words."""
    asked = significant_words(question)
    if not asked:
        return False
    held = significant_words(f"{title} {text}")
    return len(asked & held) / len(asked) >= MIN_QUESTION_COVERAGE
