"""Holds a streamed reply back sentence by sentence until its guardrail accepts it.

A streamed reply reaches the learner as it is written, so its guardrail cannot wait for the end:
text is held until a sentence ends (``.``, ``!``, ``?`` or ``…`` followed by a space, or a line
break), the finished sentences are checked, and only text that passed goes out. A sentence that
fails stops the reply before the learner sees any of it. A run of :data:`MAX_HELD_CHARS` without
a sentence end is checked and sent as it is, so a reply without punctuation is not held to the
end.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MAX_HELD_CHARS = 400
_SENTENCE_END = re.compile(r"[.!?…][\"'»)\]]*\s+|\n")


class ReplyRejected(Exception):
    """A sentence of the reply failed its guardrail; ``problem`` says why (never model text)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class SentenceScreen:
    """Feed it deltas; it returns the text that may be sent now."""

    def __init__(self, check: Callable[[str], str | None]) -> None:
        self._check = check
        self._held = ""
        self.shown: list[str] = []
        """Every piece released so far: what the learner has seen."""

    @property
    def shown_text(self) -> str:
        return "".join(self.shown)

    def feed(self, delta: str) -> str:
        """The finished sentences the delta completes, checked; "" while a sentence is open.
        Raises :class:`ReplyRejected`."""
        self._held += delta
        ends = [match.end() for match in _SENTENCE_END.finditer(self._held)]
        cut = ends[-1] if ends else (len(self._held) if len(self._held) >= MAX_HELD_CHARS else 0)
        if not cut:
            return ""
        return self._release(cut)

    def flush(self) -> str:
        """What is still held, checked, at the clean end of the reply."""
        return self._release(len(self._held)) if self._held else ""

    def _release(self, cut: int) -> str:
        text, self._held = self._held[:cut], self._held[cut:]
        problem = self._check(text)
        if problem is not None:
            raise ReplyRejected(problem)
        self.shown.append(text)
        return text
