"""What identifies a child or the people around the child, found in any text and masked in text
a person wrote.

Two sources, one reading: the circle's own names, e-mail, phone numbers, addresses, schools and
birth dates (:mod:`.circle`, known by keyed fingerprints only) and anyone's contact data by its
shape (:mod:`.shapes`). Both read the text folded by :mod:`.tokens` (case, diacritics,
full-width forms, look-alike letters and invisible characters make no difference), and what is
percent-encoded, written as HTML references, escaped or in base64 is read decoded
(:func:`.text.decodings`).

:func:`identifier_kind` says whether a text holds one (the gate refuses structured fields that
do); :func:`mask_identifiers` replaces each with its typed placeholder
(:data:`.rules.PLACEHOLDERS`: ``[name]``, ``[phone]``...) and counts what it replaced by kind.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from nemo_context.gate.circle import Circle
from nemo_context.gate.rules import PLACEHOLDERS
from nemo_context.gate.shapes import Span, shapes
from nemo_context.gate.text import MAX_DECODE_DEPTH, decodings, encoded_chunks
from nemo_context.gate.tokens import fold_plain, origins_of

NO_CIRCLE: Final = Circle(key=b"")
"""A circle with nothing in it: shapes only (content that belongs to no learner)."""


def _spans(text: str, folded: str, circle: Circle) -> list[Span]:
    return [*circle.spans(folded, text), *shapes(folded)]


def identifier_kind(text: str, circle: Circle, depth: int = 0) -> str | None:
    """The kind of the first identifier in ``text``, decoded or not, or None."""
    found = _spans(text, fold_plain(text), circle)
    if found:
        return min(found)[2]
    if depth < MAX_DECODE_DEPTH:
        for decoded in decodings(text):
            # "35%" decodes to itself: read only what decoding changed.
            if decoded == text:
                continue
            kind = identifier_kind(decoded, circle, depth + 1)
            if kind is not None:
                return kind
    return None


def _merge(spans: list[Span]) -> list[Span]:
    """Overlapping spans made one, with the kind of the one that starts first."""
    merged: list[Span] = []
    for start, end, kind in sorted(spans):
        if merged and start < merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2])
        else:
            merged.append((start, end, kind))
    return merged


def identifier_spans(text: str, circle: Circle) -> list[Span]:
    """Spans of ``text`` as written holding an identifier, each with its kind (encoded chunks
    that decode to one are a span of their own)."""
    folded = fold_plain(text)
    found = _spans(text, folded, circle)
    spans: list[Span] = []
    if found:
        origins = origins_of(text)
        spans.extend((origins[start], origins[end - 1] + 1, kind) for start, end, kind in found)
    for start, end, decoded in encoded_chunks(text):
        kind = identifier_kind(decoded, circle, depth=1)
        if kind is not None:
            spans.append((start, end, kind))
    return _merge(spans)


def mask_identifiers(text: str, circle: Circle) -> tuple[str, Counter[str]]:
    """``text`` with each identifier replaced by its typed placeholder, and the count by kind."""
    spans = identifier_spans(text, circle)
    counts: Counter[str] = Counter()
    if not spans:
        return text, counts
    pieces: list[str] = []
    position = 0
    for start, end, kind in spans:
        pieces.extend((text[position:start], PLACEHOLDERS[kind]))
        counts[kind] += 1
        position = end
    pieces.append(text[position:])
    return "".join(pieces), counts
