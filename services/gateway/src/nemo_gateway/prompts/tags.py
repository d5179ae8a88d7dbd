"""The tags that fence data in prompts, and keeping inserted text from closing or opening them.

Learner context, numbered sources and conversation data go between tags such as ``<tai_lieu>``
... ``</tai_lieu>``, and the system rules say that what is inside is data, not instructions.
Inserted text that itself holds one of these tags could end its block early and put its own
words outside it, where they read as instructions. So every inserted field passes through
:func:`neutralise_tags`: the ``<`` of any sequence that opens or closes one of the tags, in
either language, in any case and with spaces or attributes (``</tai_lieu>``, ``< /Documents >``,
``<context id=1>``), becomes U+2039 SINGLE LEFT-POINTING ANGLE QUOTATION MARK. A person reads
the same text; the model sees no tag.
"""

from __future__ import annotations

import re

from nemo_gateway.prompts.spec import Lang

CONTEXT_TAG: dict[Lang, str] = {Lang.VI: "ngu_canh", Lang.EN: "context"}
SOURCES_TAG: dict[Lang, str] = {Lang.VI: "tai_lieu", Lang.EN: "documents"}
CONVERSATION_TAG: dict[Lang, str] = {Lang.VI: "du_lieu_hoi_thoai", Lang.EN: "conversation_data"}

_NAMES = sorted(
    {name for tags in (CONTEXT_TAG, SOURCES_TAG, CONVERSATION_TAG) for name in tags.values()}
)
# The "<" of "<name", "</name", "< / name"..., where the name ends the word. The second run of
# spaces only follows a "/", so a long run of spaces is scanned once, not once per split.
_TAG_START = re.compile(r"<(?=\s*(?:/\s*)?(?:" + "|".join(_NAMES) + r")(?![\w-]))", re.IGNORECASE)
NEUTRAL_BRACKET = "\N{SINGLE LEFT-POINTING ANGLE QUOTATION MARK}"


def neutralise_tags(text: str) -> str:
    """``text`` with every sequence that could open or close a data tag made harmless."""
    return _TAG_START.sub(NEUTRAL_BRACKET, text)


def has_data_tag(text: str) -> bool:
    """Whether ``text`` holds a sequence that would open or close a data tag."""
    return _TAG_START.search(text) is not None


def tagged(tag: str, body: str) -> str:
    """``body``, neutralised, inside ``<tag>`` ... ``</tag>``, on their own lines."""
    return f"<{tag}>\n{neutralise_tags(body)}\n</{tag}>"
