"""Holds a streamed reply back until the reply so far, as a whole, passes its check.

A streamed reply reaches the learner as it is written, so its check cannot wait for the end; and
a check of each piece alone misses what straddles two pieces (a link cut after "ht", a score cut
from its "điểm", a pseudonym cut in two). So:

- every delta is cleaned first: characters a reader does not see (controls but line breaks and
  tabs, zero-width, bidirectional and tag characters) are dropped
  (:func:`nemo_gateway.prompts.plain_text.visible`), so they are neither shown nor recorded;
- text is held until a sentence ends (``.``, ``!``, ``?`` or ``…`` followed by a space, or a line
  break). Then the reply so far, what was released and the finished sentences together, is
  checked, and the sentences go out only if it passes. A check that fails stops the reply: what
  was released stays all the learner saw;
- a run of :data:`MAX_HELD_CHARS` without a sentence end is released up to the last space at
  least :data:`HOLD_BACK_CHARS` before its end (or at that point when there is no space), after
  the same check: the tail kept back is longer than any forbidden pattern needs to be recognised,
  and what follows is checked together with what was released anyway;
- the reply is bounded: past ``max_chars`` characters or ``max_deltas`` deltas (each carries at
  least one token) it is stopped, whatever the provider does with its token limit.

The check reads :data:`LOOK_BACK_CHARS` of released text before the new text, extended back to
the start of its sentence: every pattern it looks for is shorter than that
(:data:`nemo_gateway.prompts.plain_text.MAX_PATTERN_CHARS`), and score claims are
judged sentence by sentence, so the verdict is the verdict on the whole reply, at a cost that does
not grow with the reply. The invariant: the released text always passes the check as a whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from nemo_gateway.prompts.plain_text import MAX_PATTERN_CHARS, visible

MAX_HELD_CHARS = 400
HOLD_BACK_CHARS = 120
LOOK_BACK_CHARS = MAX_PATTERN_CHARS
_SENTENCE_END = re.compile(r"[.!?…][\"'»)\]]*\s+|\n")
# Where the checks start a new sentence (the score-claim check splits here).
_CHECK_SENTENCE_START = re.compile(r"[.!?;]\s+|\n+")
_SPACE = re.compile(r"\s")


class ReplyRejected(Exception):
    """The reply failed its check; ``problem`` says why (never model text)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class ReplyTooLong(Exception):
    """The reply ran past its bound in characters or deltas."""


class ReplyScreen:
    """Feed it deltas; it returns the text that may be sent now."""

    def __init__(
        self, check: Callable[[str], str | None], *, max_chars: int, max_deltas: int
    ) -> None:
        self._check = check
        self._max_chars = max_chars
        self._max_deltas = max_deltas
        self._deltas = 0
        self._held = ""
        self._shown: list[str] = []
        self._shown_chars = 0
        self._sentence_start = 0
        """Where the sentence the released text ends in starts."""

    @property
    def shown(self) -> bool:
        """Whether the learner has seen anything."""
        return bool(self._shown)

    @property
    def shown_text(self) -> str:
        """Every piece released so far: exactly what the learner has seen."""
        return "".join(self._shown)

    def feed(self, delta: str) -> str:
        """What the delta lets out, checked; "" while a sentence is open. Raises
        :class:`ReplyRejected` or :class:`ReplyTooLong` (nothing of the delta goes out then)."""
        self._deltas += 1
        self._held += visible(delta)
        if self._deltas > self._max_deltas or self._shown_chars + len(self._held) > self._max_chars:
            raise ReplyTooLong
        ends = [match.end() for match in _SENTENCE_END.finditer(self._held)]
        if ends:
            return self._release(ends[-1])
        if len(self._held) >= MAX_HELD_CHARS:
            return self._release(_forced_cut(self._held))
        return ""

    def flush(self) -> str:
        """What is still held, checked, at the clean end of the reply."""
        return self._release(len(self._held)) if self._held else ""

    def _release(self, cut: int) -> str:
        text = self._held[:cut]
        shown = self.shown_text
        start = max(0, min(self._sentence_start, len(shown) - LOOK_BACK_CHARS))
        window = shown[start:] + text
        if window.strip() and (problem := self._check(window)) is not None:
            raise ReplyRejected(problem)
        self._held = self._held[cut:]
        starts = [match.end() for match in _CHECK_SENTENCE_START.finditer(text)]
        if starts:
            self._sentence_start = len(shown) + starts[-1]
        self._shown.append(text)
        self._shown_chars += len(text)
        return text


def _forced_cut(held: str) -> int:
    """Where a run without a sentence end is cut: after the last space at least
    :data:`HOLD_BACK_CHARS` before its end, else at that point."""
    limit = len(held) - HOLD_BACK_CHARS
    spaces = [match.end() for match in _SPACE.finditer(held, 0, limit)]
    return spaces[-1] if spaces else limit
