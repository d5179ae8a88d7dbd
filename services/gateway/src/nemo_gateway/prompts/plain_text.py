"""Learner-facing text is plain text, and names nothing that identifies anyone.

Clients may render what they receive as markdown or HTML, so every learner-facing output field is
plain text by contract (the output protos say so): LaTeX math written with backslashes is the one
markup allowed, since it is what a maths tutor writes and it runs nothing. What a generated text
must not hold:

- **hidden characters**: control characters other than line breaks and tabs, and every
  default-ignorable code point (zero-width and bidirectional controls, tag characters). They are
  stripped from a streamed reply before it is released (:func:`visible`) and refused in a whole
  answer;
- **markup**: an HTML tag, comment or declaration; a markdown link, image or link reference;
- **links**: a URI scheme (``https://``, ``javascript:``...), ``www.``, a bare domain under a
  top-level domain of the Public Suffix List (as the ``publicsuffixlist`` package ships it);
- **identifiers**: the shape of a learner's pseudonym (``nemo_`` and hex), of the platform's keys
  (``L-2041-1``, UUIDs), of a provider key (``sk-...``), and any value the caller forbids.

Every pattern is shorter than :data:`MAX_PATTERN_CHARS`, so a stream can check the reply a
window at a time (:mod:`nemo_gateway.screen`). Every check but the first reads the text folded
as the instruction checks read it (:func:`nemo_core.text.fold_lookalikes`): any case, invisible
characters inside, full-width and look-alike letters make no difference. The patterns below are
written for folded text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache, lru_cache
from importlib.resources import files
from typing import Final

import publicsuffixlist

from nemo_core.text import INVISIBLE, fold_lookalikes

MAX_PATTERN_CHARS: Final = 400
"""Longer than any match of the patterns below (a domain of four labels, a tag's attributes)."""
_KEPT_CONTROLS: Final = frozenset("\n\t")
# Categories a reader never sees as text: controls, surrogates (never valid text), private use
# and unassigned code points.
_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cs", "Co", "Cn"})

# Markup: a tag is a name right after "<" (no space) closed by ">" on its own, or with
# attributes that hold an "=", so that "a<b và c>d" in a maths reply is no tag.
_HTML: Final = (
    r"<\s{0,20}/?\s{0,20}[a-z][a-z0-9-]{0,30}\s{0,20}/?\s{0,20}>"
    r"|<[a-z][a-z0-9-]{0,30}\s[^<>]{0,150}=[^<>]{0,150}>"
    r"|<!--|<![a-z\[]|<\?[a-z]"
)
_MARKDOWN: Final = r"!?\[[^\[\]\n]{0,200}\]\s{0,20}\(|^\s{0,20}\[[^\[\]\n]{1,200}\]:\s{0,20}\S"
# Schemes that work without "//"; any other scheme is caught with its "//".
_BARE_SCHEMES: Final = ("javascript", "vbscript", "data", "file", "mailto", "tel", "sms", "blob")
_SCHEME: Final = (
    rf"[a-z][a-z0-9+.-]{{0,30}}\s{{0,5}}:\s{{0,5}}/\s{{0,5}}/"
    rf"|\b(?:{'|'.join(_BARE_SCHEMES)})\s{{0,5}}:"
)
# The label separators IDNA reads as ".": full stop, ideographic, full-width and half-width
# ideographic full stops (full-width is already "." once folded).
_DOT: Final = r"[.\u3002\uff61]"
_DOMAIN: Final = re.compile(
    rf"(?<![\w@-])(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?{_DOT}){{1,4}}([a-z]{{2,24}}|xn--[a-z0-9-]+)"
    r"(?![\w-])"
)
_LINK: Final = re.compile(rf"{_SCHEME}|\bwww{_DOT}")

# Identifiers: the pseudonym (nemo_ and hex, any separator or none, glued to a word or not), the
# demo keys (kind-school-serial, glued or not), UUIDs, provider keys.
_PSEUDONYM: Final = r"nem[o0][\W_]{0,3}[0-9a-f]{6,}"
_PLATFORM_KEY: Final = r"[a-z]-\d{4}-\d{1,6}(?!\d)"
_UUID: Final = r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
_PROVIDER_KEY: Final = r"\b(?:sk|nvapi|xai|gsk)[-_][a-z0-9_-]{16,}"
_IDENTIFIER: Final = re.compile("|".join((_PSEUDONYM, _PLATFORM_KEY, _UUID, _PROVIDER_KEY)))

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


def markup_problem(folded: str) -> str | None:
    """What makes folded text more than plain text: markup or a link; None when it is plain."""
    if _MARKUP.search(folded):
        return "holds markup (HTML or a markdown link); it must be plain text"
    if _LINK.search(folded) or _has_domain(folded):
        return "contains a link"
    return None


def identifier_problem(folded: str, forbidden: Iterable[str]) -> str | None:
    """Whether folded text names an identifier: a pseudonym, key or provider key shape, or one
    of the ``forbidden`` values in any spelling."""
    if _IDENTIFIER.search(folded):
        return "repeats an identifier"
    for value in forbidden:
        if value and fold_lookalikes(value) in folded:
            return "repeats an identifier"
    return None
