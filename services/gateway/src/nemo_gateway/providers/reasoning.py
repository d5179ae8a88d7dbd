"""Reasoning text is never the answer.

Servers with a reasoning parser put a model's thinking in a field of its own
(``reasoning_content``, ``reasoning``), which the wire formats never read. Servers without one
leave it in the answer text as a leading ``<think>...</think>`` block: it is dropped here before
the text is parsed or streamed to a client. A block that never closes is all reasoning and no
answer.
"""

from __future__ import annotations

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


def strip_reasoning(text: str) -> str:
    """``text`` without a leading reasoning block (and the blank space after it)."""
    body = text.lstrip()
    if not body.startswith(OPEN_TAG):
        return text
    end = body.find(CLOSE_TAG)
    if end < 0:
        return ""
    return body[end + len(CLOSE_TAG) :].lstrip()


class ReasoningFilter:
    """:func:`strip_reasoning` over a stream of deltas: what :meth:`feed` returns, joined with
    :meth:`flush`, is what ``strip_reasoning`` returns for the whole text. Text is held back
    only while it could still be the start of a reasoning block."""

    def __init__(self) -> None:
        self._held = ""
        self._state = "start"  # start, then thinking and after (a reasoning block), answer

    def feed(self, delta: str) -> str:
        if self._state == "answer":
            return delta
        self._held += delta
        if self._state == "start":
            body = self._held.lstrip()
            if body.startswith(OPEN_TAG):
                self._state = "thinking"
            elif OPEN_TAG.startswith(body):
                return ""  # blank so far, or the beginning of the opening tag
            else:
                self._state = "answer"
                return self._take(self._held)
        if self._state == "thinking":
            end = self._held.find(CLOSE_TAG)
            if end < 0:
                return ""
            self._held = self._held[end + len(CLOSE_TAG) :]
            self._state = "after"
        rest = self._held.lstrip()
        if not rest:
            self._held = ""
            return ""
        self._state = "answer"
        return self._take(rest)

    def _take(self, text: str) -> str:
        self._held = ""
        return text

    def flush(self) -> str:
        """The end of the stream: text held at the start (blank, or the beginning of the
        opening tag) was answer text after all; an unclosed reasoning block was not."""
        held, self._held = self._held, ""
        return held if self._state == "start" else ""
