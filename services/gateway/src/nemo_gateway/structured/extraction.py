"""From model text to JSON, in the order the pipeline tries it.

1. strict parse — the whole text, or the body of its first code fence (prose around the
   fence is allowed), parsed strictly. Success here is the MODEL path.
2. :func:`slice_outer` — only when step 1 failed: from the first ``{`` (or ``[``, whichever the
   output model's top level is) to the last matching closer, in the fenced body when there is a
   fence (a ``{`` in the prose before it must not widen the slice).
3. :func:`repair_backslashes` — only when the slice still fails: a syntax repair that doubles
   every ``\\`` that starts no valid JSON escape, so ``\\Theta`` or ``\\log`` in Vietnamese text
   survive as written. No character of the content changes meaning.

A failure is an explicit :class:`ParseFailure`, never an empty value: an empty dict here would
become a score of 0 for a learner who did nothing wrong. Every way the text can fail to parse is
one, including JSON nested deeper than the parser recurses.

LaTeX that happens to be a valid JSON escape (``\\frac`` is form feed + "rac", ``\\theta`` is tab
+ "heta") parses "successfully" into the wrong text. That case is not repaired (the text is
ambiguous, and a repair would rewrite content); :mod:`nemo_gateway.structured.latex` detects it
and the pipeline re-asks the model to double its backslashes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)\r?\n?```", re.DOTALL)
# A JSON escape (\" \\ \/ \b \f \n \r \t \uXXXX), matched whole so the second backslash of
# "\\" is never taken for a stray one; or else a lone, stray backslash.
_ESCAPE_OR_STRAY = re.compile(r'\\(?:(["\\/bfnrt]|u[0-9a-fA-F]{4})|)')

TopLevel = Literal["object", "array"]


class Step(StrEnum):
    """Which step produced the JSON; the run record's reason names the last one needed."""

    STRICT = "STRICT"
    BRACE_SLICE = "BRACE_SLICE"
    BACKSLASH_REPAIR = "BACKSLASH_REPAIR"


class ParseFailure(ValueError):
    """The text holds no JSON of the expected top-level type, even after the repairs."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """JSON found in model text, and how."""

    value: Any
    step: Step
    source: str
    """The JSON text as finally parsed (after slicing and repair)."""


def unfence(text: str) -> str:
    """The body of the first code fence, or the stripped text when there is none."""
    match = _FENCE.search(text)
    return match.group(1).strip() if match else text.strip()


def slice_outer(text: str, top: TopLevel) -> str:
    """From the first opener to the last closer of the top-level type; raises ParseFailure."""
    opener, closer = ("{", "}") if top == "object" else ("[", "]")
    start, end = text.find(opener), text.rfind(closer)
    if start < 0 or end <= start:
        raise ParseFailure(f"no {opener}...{closer} in the answer")
    return text[start : end + 1]


def repair_backslashes(text: str) -> str:
    """Double every backslash that starts no valid JSON escape (a syntax-only repair)."""
    return _ESCAPE_OR_STRAY.sub(lambda m: m.group(0) if m.group(1) else "\\\\", text)


def _top_level_matches(value: Any, top: TopLevel) -> bool:
    return isinstance(value, dict) if top == "object" else isinstance(value, list)


def _loads(text: str) -> Any:
    """``json.loads`` with every failure as a ParseFailure, JSON nested past the parser's
    recursion limit included."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ParseFailure("the JSON is nested too deeply") from None
    except ValueError as exc:
        raise ParseFailure(f"not valid JSON: {exc}") from None


def extract_json(text: str, top: TopLevel) -> Parsed:
    """Run the three steps in order; raises :class:`ParseFailure` when all fail."""
    candidate = unfence(text)
    try:
        value = _loads(candidate)
    except ParseFailure:
        pass
    else:
        if _top_level_matches(value, top):
            return Parsed(value, Step.STRICT, candidate)
    sliced = slice_outer(candidate, top)
    try:
        value = _loads(sliced)
    except ParseFailure:
        pass
    else:
        if _top_level_matches(value, top):
            return Parsed(value, Step.BRACE_SLICE, sliced)
    repaired = repair_backslashes(sliced)
    # The slice runs from an opener to a closer and the repair touches only backslashes, so
    # whatever parses here has the top-level type.
    return Parsed(_loads(repaired), Step.BACKSLASH_REPAIR, repaired)
