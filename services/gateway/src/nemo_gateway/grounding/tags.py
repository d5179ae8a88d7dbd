"""The tags that fence data in prompts, and keeping inserted text from posing as prompt structure.

Learner context, numbered sources and conversation data go between tags such as ``<tai_lieu>``
... ``</tai_lieu>``, and the system rules say that what is inside is data, not instructions.
Inserted text that itself holds one of these tags could end its block early and put its own
words outside it, where they read as instructions. So every inserted field passes through
:func:`neutralise_tags`:

- invisible characters (every default-ignorable code point: zero-width spaces and joiners,
  bidirectional controls and isolates, soft hyphens, tag characters) are removed first, so
  ``</tai\u200b_lieu>`` is seen as what a reader sees;
- the opener of any sequence that opens or closes one of the tags, in either language, in any
  case, with spaces or attributes (``</tai_lieu>``, ``< /Documents >``, ``<context id=1>``),
  written in full-width or look-alike characters (Unicode's confusables data, as
  :func:`nemo_core.text.fold_lookalikes` reads it: U+2039, U+2044 FRACTION SLASH) or as an HTML
  character reference (``&lt;/tai_lieu&gt;``), becomes :data:`NEUTRAL_BRACKET` («), which no
  folding reads as ``<``. A person reads the same text; the model sees no tag.

A grounded answer's sources are headed ``[n]``; :func:`neutralise_source_numbers` turns every
bracketed number in a passage into ``(n)``: any opening and closing bracket of Unicode
(categories Ps and Pe: ``[``, ``【``, the full-width bracket...) but the round and curly ones,
around digits of any script or superscripts (``[³]``, ``[٣]``), so a passage can neither forge the
header of another source nor lend the model a citation it did not make.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache

from nemo_core.text import INVISIBLE, fold_lookalikes, fold_lookalikes_with_positions
from nemo_gateway.lang import Lang

CONTEXT_TAG: dict[Lang, str] = {Lang.VI: "ngu_canh", Lang.EN: "context"}
SOURCES_TAG: dict[Lang, str] = {Lang.VI: "tai_lieu", Lang.EN: "documents"}
CONVERSATION_TAG: dict[Lang, str] = {Lang.VI: "du_lieu_hoi_thoai", Lang.EN: "conversation_data"}
ITEM_TAG: dict[Lang, str] = {Lang.VI: "cau_hoi_tham_dinh", Lang.EN: "item_under_review"}

NEUTRAL_BRACKET = "\N{LEFT-POINTING DOUBLE ANGLE QUOTATION MARK}"

_NAMES = sorted(
    {
        name
        for tags in (CONTEXT_TAG, SOURCES_TAG, CONVERSATION_TAG, ITEM_TAG)
        for name in tags.values()
    }
)
# In folded text: "<", or its HTML character references; the same for "/".
_OPEN = r"(?:<|&lt;?|&#0*60;?|&#x0*3c;?)"
_SLASH = r"(?:/|&sol;?|&#0*47;?|&#x0*2f;?)"
# The opener of "<name", "</name", "< / name"..., where the name ends the word. The second run
# of spaces only follows a "/", so a long run of spaces is scanned once, not once per split.
_TAG_START = re.compile(rf"{_OPEN}(?=\s*(?:{_SLASH}\s*)?(?:{'|'.join(_NAMES)})(?![\w-]))")


def tag_openers(visible: str) -> list[tuple[int, int]]:
    """(start, end) in ``visible`` (a text without invisible characters) of every opener of a
    data tag."""
    # Every opener starts with "<" or "&" once folded: without either there is none, and the
    # positions need not be computed.
    plain = fold_lookalikes(visible)
    if "<" not in plain and "&" not in plain:
        return []
    folded, origins = fold_lookalikes_with_positions(visible)
    return [
        (origins[match.start()], origins[match.end() - 1] + 1)
        for match in _TAG_START.finditer(folded)
    ]


def neutralise_tags(text: str) -> str:
    """``text`` without invisible characters and with every sequence that could open or close a
    data tag made harmless."""
    visible = INVISIBLE.sub("", text)
    pieces: list[str] = []
    done = 0
    for start, end in tag_openers(visible):
        pieces += [visible[done:start], NEUTRAL_BRACKET]
        done = end
    pieces.append(visible[done:])
    return "".join(pieces)


def none_has_data_tag(visible: Iterable[str]) -> bool:
    """True only when no text of ``visible`` (texts without invisible characters) holds a data
    tag opener: folded together, they hold no "<" and no "&" (folding goes character by
    character, so each piece's folding is part of the joined one)."""
    plain = fold_lookalikes("\n".join(visible))
    return "<" not in plain and "&" not in plain


def has_data_tag(text: str) -> bool:
    """Whether ``text`` holds a sequence that would open or close a data tag."""
    return bool(tag_openers(INVISIBLE.sub("", text)))


@cache
def _source_number() -> re.Pattern[str]:
    """A bracketed number: any opening bracket but ( and {, digits of any kind, its closer."""
    opening, closing, digits = [], [], []
    for code in range(0x20000):
        char = chr(code)
        category = unicodedata.category(char)
        plain = unicodedata.normalize("NFKC", char)
        if category == "Ps" and plain not in "({":
            opening.append(re.escape(char))
        elif category == "Pe" and plain not in ")}":
            closing.append(re.escape(char))
        elif unicodedata.digit(char, None) is not None:
            digits.append(re.escape(char))
    space = r"[\s\u3000]*"
    return re.compile(
        f"[{''.join(opening)}]{space}([{''.join(digits)}]+){space}[{''.join(closing)}]"
    )


def _number(digits: str) -> str:
    return "".join(str(unicodedata.digit(char)) for char in digits)


def neutralise_source_numbers(text: str) -> str:
    """``text`` with every bracketed number (``[2]``, ``【2】``, ``[²]``...) written ``(2)``."""
    visible = INVISIBLE.sub("", text)
    return _source_number().sub(lambda m: f"({_number(m.group(1))})", visible)


def tagged(tag: str, body: str) -> str:
    """``body``, neutralised, inside ``<tag>`` ... ``</tag>``, on their own lines."""
    return f"<{tag}>\n{neutralise_tags(body)}\n</{tag}>"
