"""Markup that runs script, generated in the forms a browser's HTML parser or a markdown renderer
reads, so a plain-text check is tested against the class rather than against a few examples.

:func:`markup` draws one piece from a random source (``random.Random``, or hypothesis's
``st.randoms()``), combining:

- the element: common and rare names (``svg``, ``details``, ``math``), custom elements and
  made-up names, in any letter case;
- the form: an open tag with attributes, an unclosed one (``<img src=x onerror=alert(1)//``), a
  self-closing or end tag, a comment, a declaration, a processing instruction, or an
  event-handler attribute alone (for a client that pastes text inside a tag);
- what separates the name from the attributes: a space, a tab, a line break, ``/``;
- attributes of any length (a ``title`` of a few hundred characters before the handler);
- the spelling of the opening bracket: ``<``, full-width and small forms, HTML character
  references named, decimal and hexadecimal (with leading zeros, with or without ``;``, once or
  twice encoded).

Each piece comes with its ``opener``: the part of it that already is markup (the bracket as
written and the character after it, or the handler's name up to its value), which a learner
must never be shown.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache
from typing import Final

ELEMENTS: Final = (
    "img", "svg", "script", "iframe", "a", "body", "details", "video", "audio", "object",
    "embed", "math", "style", "input", "marquee", "image", "x", "nemo-widget", "b", "p",
)  # fmt: skip
EVENTS: Final = (
    "onerror", "onload", "onclick", "onmouseover", "onfocus", "ontoggle", "onbegin",
    "onanimationstart", "onpointerenter", "oncut",
)  # fmt: skip
PAYLOADS: Final = ("alert(1)", "alert`1`", "fetch('//x')", "eval(atob('YQ=='))")
SEPARATORS: Final = (" ", "\t", "\n", "/", " \n\t")
BRACKETS: Final = (
    "<", "\uff1c", "\ufe64", "&lt;", "&LT;", "&lt", "&#60;", "&#060;", "&#x3c;", "&#X3C;",
    "&#x00003c;", "&#60", "&amp;lt;",
)  # fmt: skip
""""<" as written: itself, full-width, small form, and as HTML character references."""


@dataclass(frozen=True, slots=True)
class Markup:
    """One generated piece of markup."""

    text: str
    opener: str
    """The start of ``text`` that already is markup."""


def _case(name: str, rng: random.Random) -> str:
    return "".join(char.upper() if rng.random() < 0.3 else char for char in name)


def _attributes(rng: random.Random) -> str:
    """Zero or more harmless attributes, one of them possibly long."""
    pieces = []
    for _ in range(rng.randint(0, 3)):
        length = rng.choice((1, 20, 200, 600))
        value = "".join(rng.choice("abc xyz…ểố") for _ in range(length))
        pieces.append(rng.choice((f'title="{value}"', f"alt='{value}'", "src=x", "open")))
    separator = rng.choice(SEPARATORS)
    return "".join(piece + separator for piece in pieces)


def _handler(rng: random.Random) -> tuple[str, str]:
    """An event-handler attribute and its start up to its value's first character."""
    event, payload = _case(rng.choice(EVENTS), rng), rng.choice(PAYLOADS)
    quote = rng.choice(("", '"', "'"))
    equals = rng.choice(("=", " = ", "\t=", "="))
    if not quote and equals != "=":
        # Unquoted after spaces: a call is what makes it a handler.
        call = min(i for i in (payload.find("("), payload.find("`")) if i >= 0)
        return f"{event}{equals}{payload}", f"{event}{equals}{payload[: call + 1]}"
    return f"{event}{equals}{quote}{payload}{quote}", f"{event}{equals}{quote or payload[0]}"


def markup(rng: random.Random) -> Markup:
    """One piece of markup (see the module docstring)."""
    bracket = rng.choice(BRACKETS)
    name = _case(rng.choice(ELEMENTS), rng)
    separator = rng.choice(SEPARATORS)
    handler, handler_opener = _handler(rng)
    close = rng.choice(("&gt;", ">", "\uff1e")) if bracket not in "<\uff1c\ufe64" else ">"
    form = rng.randrange(8)
    if form == 0:  # open tag, closed
        text = f"{bracket}{name}{separator}{_attributes(rng)}{handler}{close}"
    elif form == 1:  # unclosed, as a filter that waits for ">" never sees it end
        text = f"{bracket}{name}{separator}{_attributes(rng)}{handler}//"
    elif form == 2:  # self-closing, nothing after the name but "/"
        text = f"{bracket}{name}/{handler}{close}"
    elif form == 3:  # end tag
        text = f"{bracket}/{name}{close}"
    elif form == 4:
        text = f"{bracket}!--{handler}--{close}"
    elif form == 5:
        text = f"{bracket}!{rng.choice(('DOCTYPE html', '[CDATA[x]]'))}{close}"
    elif form == 6:
        text = f"{bracket}?xml version=1.0?{close}"
    else:  # a handler alone, breaking out of an attribute a client pasted the text into
        prefix = rng.choice(('" ', "' ", "x ", '"/'))
        return Markup(f"{prefix}{handler}", handler_opener)
    return Markup(text, text[: len(bracket) + 1])


@cache
def hostile_markup(count: int = 200, seed: int = 2029) -> tuple[Markup, ...]:
    """``count`` distinct pieces of markup, the same on every run."""
    rng = random.Random(seed)  # noqa: S311  a fixed corpus, not a secret
    found: dict[str, Markup] = {}
    while len(found) < count:
        piece = markup(rng)
        found.setdefault(piece.text, piece)
    return tuple(found.values())
