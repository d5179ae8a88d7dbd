"""What identifies a child or the people around the child, found in any text and masked in text
a person wrote.

Two sources, one reading: the circle's own names, e-mail, phone numbers, addresses, schools and
birth dates (:mod:`.circle`, known by keyed fingerprints only) and anyone's contact data by its
shape (:mod:`.shapes`). Both read the text folded by :mod:`.tokens` (case, diacritics,
full-width forms, look-alike letters and invisible characters make no difference), and what is
percent-encoded, written as HTML references, escaped or in base64 is read decoded
(:func:`.text.decodings`).

:func:`identifier_kind` names the first one in a text (the rule a refused field breaks);
:func:`identifier_spans` says where each is, for masking (:mod:`.masking`).
"""

from __future__ import annotations

from typing import Final

from nemo_context.gate.circle import Circle
from nemo_context.gate.reading import Reading, read
from nemo_context.gate.shapes import Span, shapes
from nemo_context.gate.text import encoded_chunks

NO_CIRCLE: Final = Circle(key=b"")
"""A circle with nothing in it: shapes only (content that belongs to no learner)."""


def _spans(reading: Reading, circle: Circle) -> list[Span]:
    return [*circle.spans(reading), *shapes(reading.plain)]


def identifier_kind(reading: Reading, circle: Circle) -> str | None:
    """The kind of the first identifier in the string read, as written or decoded, or None."""
    for node in reading.nodes():
        found = _spans(node, circle)
        if found:
            return min(found)[2]
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
    reading = read(text)
    found = _spans(reading, circle)
    spans: list[Span] = []
    if found:
        origins = reading.origins
        spans.extend((origins[start], origins[end - 1] + 1, kind) for start, end, kind in found)
    for start, end, decoded in encoded_chunks(text):
        kind = identifier_kind(Reading(decoded, depth=1), circle)
        if kind is not None:
            spans.append((start, end, kind))
    return _merge(spans)
