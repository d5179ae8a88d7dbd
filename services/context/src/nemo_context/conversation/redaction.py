"""Internal keys typed into chat text are masked before the identifier gate sees the bundle.

Chat messages and summaries are free text: a learner may type their own account id, or a parent
may paste one. Such text is stored as written. If the gate simply blocked it, every later turn of
that session would fail for good, since the message stays in the history; so the conversation
builder masks the forbidden values (the learner's id, family id and the ids of linked users)
inside free text first, with the same matching rule as the gate (case-insensitive, on token
boundaries), and the gate still runs on the whole bundle afterwards. Everything that is not free
text (state, profile, knowledge, ids of the bundle) is not masked: a key there is a bug and is
blocked. So is a message that is itself a JSON object naming a forbidden field (the gate reads
JSON held in strings); chat text is prose, and such a message is worth stopping the turn for.

Names written in chat are passed through. The context service cannot know them (its database role
has no privilege on name columns, by design), and a learner telling a tutor their name is part of
the conversation the learner chose to have; the gate's guarantee is about what the platform adds,
not about what the learner writes.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache
from typing import Final

MASK: Final = "[id]"


@lru_cache(maxsize=256)
def _pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    # Same boundaries as the gate: no letter or digit on either side, longest value first.
    alternatives = sorted({value for value in values if value}, key=len, reverse=True)
    if not alternatives:
        return None
    body = "|".join(re.escape(value) for value in alternatives)
    return re.compile(rf"(?<![^\W_])(?:{body})(?![^\W_])", re.IGNORECASE)


def mask_keys(text: str, forbidden_values: Collection[str]) -> str:
    """``text`` with every forbidden value replaced by :data:`MASK`."""
    pattern = _pattern(tuple(sorted(forbidden_values)))
    return text if pattern is None else pattern.sub(MASK, text)
