"""Learner-facing text is plain text, and names nothing that identifies anyone.

Clients may render what they receive as markdown or HTML, so every learner-facing output field is
plain text by contract (the output protos say so): LaTeX math written with backslashes is the one
markup allowed, since it is what a maths tutor writes and it runs nothing. What a generated text
must not hold:

- **hidden characters**: control characters other than line breaks and tabs, and every
  default-ignorable code point (zero-width and bidirectional controls, tag characters). They are
  stripped from a streamed reply before it is released (:func:`visible`) and refused in a whole
  answer;
- **markup**, found by structure rather than from a list of tags: a ``<`` right before a letter,
  ``/``, ``!`` or ``?`` opens a tag, an end tag, a comment or a declaration wherever an HTML
  parser or a markdown renderer reads it, closed or not, however long its attributes
  (``a < b`` with spaces, as maths writes it, opens nothing); an event-handler attribute
  (``onerror=``, ``onload="...``) anywhere; a markdown link, image or link reference;
- **links**: a URI scheme (``https://``, ``javascript:alert``...), ``www.``, a bare domain under
  a top-level domain of the Public Suffix List (as the ``publicsuffixlist`` package ships it);
- **identifiers**: the shapes of :mod:`nemo_gateway.prompts.identifier_shapes` (a learner's
  pseudonym, the platform's keys, UUIDs, a provider key), and any value the caller forbids.

Every pattern but a tag's opening is shorter than :data:`MAX_PATTERN_CHARS` (a tag is found by
its first two characters), so a stream can check the reply a window at a time
(:mod:`nemo_gateway.screen`). Every check but the first reads the text folded as the
instruction checks read it (:func:`nemo_core.text.fold_lookalikes`): any case, invisible
characters inside, full-width and look-alike letters make no difference; and once more with its
HTML character references decoded (``&lt;script&gt;``, ``&#60;``), up to
:data:`MAX_DECODE_DEPTH` times, since a client that decodes them shows what they encode. The
patterns below are written for folded text.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable
from functools import cache, lru_cache
from importlib.resources import files
from typing import Final

import publicsuffixlist

from nemo_core.text import INVISIBLE, fold_lookalikes
from nemo_gateway.prompts.identifier_shapes import holds_identifier

MAX_PATTERN_CHARS: Final = 400
"""Longer than any match of the patterns below (a domain of four labels, a markdown link's
text)."""
_KEPT_CONTROLS: Final = frozenset("\n\t")
# Categories a reader never sees as text: controls, surrogates (never valid text), private use
# and unassigned code points.
_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cs", "Co", "Cn"})

MAX_DECODE_DEPTH: Final = 2
"""HTML character references inside references (``&amp;lt;``) that are still decoded."""

# Markup. An HTML parser (and CommonMark's raw HTML) opens a tag, an end tag, a comment, a
# declaration or a processing instruction at "<" right before a letter, "/", "!" or "?", and
# nowhere else; a closed tag with spaces inside ("< b >") is refused too. An event-handler
# attribute (glued to its "=", or with a quoted value or a call as its value) runs script
# wherever a client pastes the text into a tag.
_HTML: Final = (
    r"<[a-z/!?]"
    r"|<\s{1,20}/?\s{0,20}[a-z][a-z0-9-]{0,30}\s{0,20}/?\s{0,20}>"
    r"|(?<![a-z0-9_-])on[a-z]{3,}(?:=|\s{0,20}=\s{0,20}(?:[\"'`]|[a-z_$][\w$.]{0,40}[(`]))"
)
_MARKDOWN: Final = r"!?\[[^\[\]\n]{0,200}\]\s{0,20}\(|^\s{0,20}\[[^\[\]\n]{1,200}\]:\s{0,20}\S"
# Schemes that work without "//", written as a link writes them (no space after the colon, so
# "data: 12 students" is prose); any other scheme is caught with its "//".
_BARE_SCHEMES: Final = ("javascript", "vbscript", "data", "file", "mailto", "tel", "sms", "blob")
_SCHEME: Final = (
    rf"[a-z][a-z0-9+.-]{{0,30}}\s{{0,5}}:\s{{0,5}}/\s{{0,5}}/"
    rf"|\b(?:{'|'.join(_BARE_SCHEMES)})\s{{0,5}}:(?=\S)"
)
# The label separators IDNA reads as ".": full stop, ideographic, full-width and half-width
# ideographic full stops (full-width is already "." once folded).
_DOT: Final = r"[.\u3002\uff61]"
_DOMAIN: Final = re.compile(
    rf"(?<![\w@-])(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?{_DOT}){{1,4}}([a-z]{{2,24}}|xn--[a-z0-9-]+)"
    r"(?![\w-])"
)
_LINK: Final = re.compile(rf"{_SCHEME}|\bwww{_DOT}")

_MARKUP: Final = re.compile(f"{_HTML}|{_MARKDOWN}", re.MULTILINE)


@cache
def top_level_domains() -> frozenset[str]:
    """The ASCII top-level domains of the Public Suffix List (the last label of every rule)."""
    data = files(publicsuffixlist).joinpath("public_suffix_list.dat").read_text(encoding="utf-8")
    found = set()
    for line in data.splitlines():
        rule = line.strip()
        if rule and not rule.startswith("//"):
            label = rule.rsplit(".", 1)[-1].lower()
            if label.isascii():
                found.add(label)
    return frozenset(found)


@lru_cache(maxsize=4096)
def _hidden(char: str) -> bool:
    if char in _KEPT_CONTROLS:
        return False
    return unicodedata.category(char) in _HIDDEN_CATEGORIES or INVISIBLE.match(char) is not None


def visible(text: str) -> str:
    """``text`` without the characters a reader does not see (see the module docstring); line
    breaks and tabs stay."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(char for char in text if not _hidden(char))


def hidden_characters(text: str) -> bool:
    """Whether ``text`` holds a character :func:`visible` removes."""
    return visible(text) != text


def _has_domain(folded: str) -> bool:
    tlds = top_level_domains()
    return any(match.group(1) in tlds for match in _DOMAIN.finditer(folded))


def spellings(folded: str) -> list[str]:
    """``folded`` and what its HTML character references decode to, folded again."""
    found = [folded]
    for _ in range(MAX_DECODE_DEPTH):
        if "&" not in found[-1]:
            break
        decoded = fold_lookalikes(html.unescape(found[-1]))
        if decoded == found[-1]:
            break
        found.append(decoded)
    return found


def markup_problem(folded: str) -> str | None:
    """What makes folded text more than plain text: markup or a link, in any of its
    :func:`spellings`; None when it is plain."""
    for spelling in spellings(folded):
        if _MARKUP.search(spelling):
            return "holds markup (HTML or a markdown link); it must be plain text"
        if _LINK.search(spelling) or _has_domain(spelling):
            return "contains a link"
    return None


def identifier_problem(folded: str, forbidden: Iterable[str]) -> str | None:
    """Whether folded text names an identifier, in any of its :func:`spellings`: a shape of
    :mod:`nemo_gateway.prompts.identifier_shapes`, or one of the ``forbidden`` values."""
    values = [fold_lookalikes(value) for value in forbidden if value]
    for spelling in spellings(folded):
        if holds_identifier(spelling) or any(value in spelling for value in values):
            return "repeats an identifier"
    return None
