"""The tags that fence data in prompts, and keeping inserted text from posing as prompt structure.

Learner context, numbered sources and conversation data go between tags such as ``<tai_lieu>``
... ``</tai_lieu>``, and the system rules say that what is inside is data, not instructions.
Inserted text that itself holds one of these tags could end its block early and put its own
words outside it, where they read as instructions. So every inserted field passes through
:func:`neutralise_tags`:

- invisible characters (zero-width spaces and joiners, bidirectional controls, soft hyphens)
  are removed first, so ``</tai\u200b_lieu>`` is seen as what a reader sees;
- the ``<`` of any sequence that opens or closes one of the tags, in either language, in any
  case, with spaces or attributes (``</tai_lieu>``, ``< /Documents >``, ``<context id=1>``) and
  in full-width or other compatibility forms (full-width ``tai_lieu``), becomes U+2039 SINGLE
  LEFT-POINTING ANGLE QUOTATION MARK. A person reads the same text; the model sees no tag.

A grounded answer's sources are headed ``[n]``; :func:`neutralise_source_numbers` turns every
bracketed number in a passage (full-width brackets and digits too) into ``(n)``, so a passage can
neither forge the header of another source nor lend the model a citation it did not make.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from nemo_core.text import INVISIBLE
from nemo_gateway.lang import Lang

CONTEXT_TAG: dict[Lang, str] = {Lang.VI: "ngu_canh", Lang.EN: "context"}
SOURCES_TAG: dict[Lang, str] = {Lang.VI: "tai_lieu", Lang.EN: "documents"}
CONVERSATION_TAG: dict[Lang, str] = {Lang.VI: "du_lieu_hoi_thoai", Lang.EN: "conversation_data"}

NEUTRAL_BRACKET = "\N{SINGLE LEFT-POINTING ANGLE QUOTATION MARK}"

# Blocks whose characters read as ASCII once normalised (NFKC): half- and full-width forms,
# small form variants, mathematical alphanumerics.
_LOOKALIKE_BLOCKS = ((0xFE50, 0xFE6F), (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF))


def _lookalikes(chars: Iterable[str]) -> dict[str, str]:
    """A regex character class for each of ``chars``: the character, its other case and every
    character of the lookalike blocks that normalises to either."""
    wanted = set(chars)
    classes: dict[str, set[str]] = {c: {c, c.upper(), c.lower()} for c in wanted}
    for start, end in _LOOKALIKE_BLOCKS:
        for code in range(start, end + 1):
            char = chr(code)
            normal = unicodedata.normalize("NFKC", char).lower()
            if normal in wanted:
                classes[normal].add(char)
    return {c: "[" + "".join(re.escape(x) for x in sorted(v)) + "]" for c, v in classes.items()}


_NAMES = sorted(
    {name for tags in (CONTEXT_TAG, SOURCES_TAG, CONVERSATION_TAG) for name in tags.values()}
)
_CLASS = _lookalikes({"<", "/", "[", "]", *"0123456789", *"".join(_NAMES)})
_SPACE = r"[\s\u3000]"
_NAME_PATTERNS = "|".join("".join(_CLASS[c] for c in name) for name in _NAMES)
# The "<" of "<name", "</name", "< / name"..., where the name ends the word. The second run of
# spaces only follows a "/", so a long run of spaces is scanned once, not once per split.
_TAG_START = re.compile(
    _CLASS["<"] + rf"(?={_SPACE}*(?:{_CLASS['/']}{_SPACE}*)?(?:{_NAME_PATTERNS})(?![\w-]))"
)
_DIGIT = "[" + "".join(_CLASS[d][1:-1] for d in "0123456789") + "]"
_SOURCE_NUMBER = re.compile(rf"{_CLASS['[']}{_SPACE}*({_DIGIT}+){_SPACE}*{_CLASS[']']}")


def neutralise_tags(text: str) -> str:
    """``text`` without invisible characters and with every sequence that could open or close a
    data tag made harmless."""
    return _TAG_START.sub(NEUTRAL_BRACKET, INVISIBLE.sub("", text))


def has_data_tag(text: str) -> bool:
    """Whether ``text`` holds a sequence that would open or close a data tag."""
    return _TAG_START.search(INVISIBLE.sub("", text)) is not None


def neutralise_source_numbers(text: str) -> str:
    """``text`` with every bracketed number (``[2]``, in full-width forms too) written ``(2)``."""
    visible = INVISIBLE.sub("", text)
    return _SOURCE_NUMBER.sub(lambda m: f"({unicodedata.normalize('NFKC', m.group(1))})", visible)


def tagged(tag: str, body: str) -> str:
    """``body``, neutralised, inside ``<tag>`` ... ``</tag>``, on their own lines."""
    return f"<{tag}>\n{neutralise_tags(body)}\n</{tag}>"
