"""Text as the identifier gate reads it: one folded spelling, decoded encodings, keys in text.

**Folding.** A key can be written in many ways that a person reads as the same key: in full-width
forms (U+FF2C for ``L``), split by zero-width spaces or soft hyphens, with other dashes (en dash,
minus sign), with Cyrillic or Greek letters that look like Latin ones (Cyrillic U+041E for ``O``,
Greek U+039D for ``N``), in another case.
:func:`fold` turns all of them into one spelling: Unicode NFKC, default-ignorable characters
removed, dashes made ``-``, look-alikes of the characters keys are made of mapped to those
characters (from Unicode's confusables data, as the ``confusable-homoglyphs`` package ships it),
lower case, and the few key characters that look alike among themselves (``1 l i``, ``0 o``...)
made one. Keys and text are folded the same way and compared on token boundaries (no letter or
digit on either side: ``nemo_core.identifiers.mention_pattern``), so ``L-2041-1`` is found in
"see l-2041-1." written with en dashes, but not in ``L-2041-10``.

**Encodings.** Percent-encoding, HTML character references, JSON and Python string escapes and
base64 are decoded (:func:`decodings`), and what they decode to is read like any text, to
a depth of :data:`MAX_DECODE_DEPTH` encodings inside each other.

**Keys written in text.** ``"email": ...`` (JSON, even cut short), ``'email': ...`` (Python) and
``email: ...`` / ``email=...`` at the start of a line or of a quoted string, or after
``{ , ; ( [ |``, are field names written into a string (:func:`text_keys`); prose such as
"write your address: ..." is not.
"""

from __future__ import annotations

import binascii
import html
import itertools
import json
import re
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib.resources import files
from typing import Final
from urllib.parse import unquote

import confusable_homoglyphs

from nemo_core.identifiers import mention_pattern

MAX_DECODE_DEPTH: Final = 3
"""Encodings inside encodings that are still decoded (base64 of percent-encoded text, ...)."""

KEY_CHARACTERS: Final = "abcdefghijklmnopqrstuvwxyz0123456789-._:"
"""What keys are made of, in lower case (see ``nemo_core.identifiers``)."""

_EXTRA_IGNORABLE: Final = (
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u2065\u3164\uffa0"
    + "".join(chr(code) for code in range(0xFE00, 0xFE10))
    + "".join(chr(code) for code in range(0xFFF0, 0xFFF9))
    + "".join(chr(code) for code in range(0xE0000, 0xE1000))
)
"""Default-ignorable code points (Unicode's Default_Ignorable_Code_Point) outside the format
characters of the first two planes (category Cf, found from the character data): the combining
grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian variation selectors, the
variation selectors, the unassigned code points Unicode reserves as ignorable (U+2065, U+FFF0 to
U+FFF8) and the whole of U+E0000 to U+E0FFF (tags, variation selectors, unassigned). Renderers
hide all of them, so each could split a key unseen."""


_VIETNAMESE_AND_TYPOGRAPHY: Final = (
    "".join(chr(code) for code in range(0xC0, 0x100))
    + "ĂăĐđĨĩŨũƠơƯư"
    + "".join(chr(code) for code in range(0x1EA0, 0x1EFA))
    + "\u2018\u2019\u201c\u201d\u2026\u00b2\u00b3\u00b0\u00b7"
)
"""Characters of ordinary Vietnamese text beyond ASCII (precomposed letters with their tone
marks, curly quotes, ellipsis, squares and degrees), which :func:`fold` can skip unless
Unicode's data says otherwise."""


@dataclass(frozen=True)
class _Folding:
    ascii: bytes
    """``bytes.translate`` table for the ASCII bytes of UTF-8 text."""
    others: dict[str, str]
    """Non-ASCII characters and what they fold to ("" for ignorable ones)."""
    unusual: re.Pattern[str]
    """Any character that is neither ASCII nor a Vietnamese letter or common typography that
    folds to itself: where text needs a closer look at all (most text does not)."""


@cache
def _folding() -> _Folding:
    """The folding tables, built once from Unicode's confusables and character data."""
    looks_like, same = _look_alikes()
    canonical = _canonical_key_characters(same)
    others: dict[str, str] = {char: canonical[min(targets)] for char, targets in looks_like.items()}
    others.update(_ignorables_and_dashes())
    table = bytearray(range(256))
    for code in range(128):
        lowered = chr(code).lower()
        table[code] = ord(canonical.get(lowered, lowered))
    plain = "".join(
        re.escape(char) for char in sorted(set(_VIETNAMESE_AND_TYPOGRAPHY) - set(others))
    )
    return _Folding(bytes(table), others, re.compile(f"[^\\x00-\\x7f{plain}]"))


@cache
def _look_alikes() -> tuple[dict[str, set[str]], list[set[str]]]:
    """Which key characters each non-ASCII character looks like, and the groups of key
    characters that look like each other (one step of Unicode's confusables data, so chains of
    look-alikes never merge unrelated letters)."""
    data = json.loads(
        files(confusable_homoglyphs).joinpath("confusables.json").read_text(encoding="utf-8")
    )
    key_characters = set(KEY_CHARACTERS)
    looks_like: dict[str, set[str]] = {}
    same: list[set[str]] = []
    for char, entries in data.items():
        for entry in entries:
            other = entry["c"].strip("\u200e\u200f")  # the data wraps right-to-left characters
            if len(char) != 1 or len(other) != 1:
                continue
            if char.isascii() and other.isascii():
                pair = {char.lower(), other.lower()}
                if pair <= key_characters and len(pair) == 2:
                    same.append(pair)
            elif other.isascii() and other.lower() in key_characters:
                looks_like.setdefault(char, set()).add(other.lower())
            elif char.isascii() and char.lower() in key_characters:
                looks_like.setdefault(other, set()).add(char.lower())
    for char in list(looks_like):  # a look-alike's other case looks alike too
        for partner in (char.lower(), char.upper()):
            if len(partner) == 1 and not partner.isascii():
                looks_like.setdefault(partner, set()).update(looks_like[char])
    same.extend(targets for targets in looks_like.values() if len(targets) > 1)
    return looks_like, same


@cache
def _ignorables_and_dashes() -> dict[str, str]:
    """Default-ignorable characters (removed) and dashes (made ``-``)."""
    folded = dict.fromkeys(_EXTRA_IGNORABLE, "")
    # Format characters and dashes outside plane 14 (all of it ignorable, above) live in the first
    # two planes; the ideographic and private-use planes hold none.
    for code in itertools.chain(range(0xD800), range(0xE000, 0x20000)):
        char = chr(code)
        category = unicodedata.category(char)
        if category == "Cf":
            folded[char] = ""
        elif category == "Pd" and char != "-":
            folded[char] = "-"
    return folded


def _canonical_key_characters(groups: list[set[str]]) -> dict[str, str]:
    """Each key character mapped to the smallest character of its group of look-alikes."""
    parent = {char: char for char in KEY_CHARACTERS}

    def root(char: str) -> str:
        while parent[char] != char:
            char = parent[char]
        return char

    for group in groups:
        roots = sorted({root(char) for char in group})
        for other in roots[1:]:
            parent[other] = roots[0]
    return {char: root(char) for char in KEY_CHARACTERS}


@cache
def _name_letters() -> dict[str, tuple[str, ...]]:
    """What a name's non-ASCII characters may stand for: nothing for an ignorable one, the
    letters a look-alike passes for, in its case (Cyrillic capital O is "O"; Cyrillic small
    i passes for "i" and "l")."""
    looks_like, _ = _look_alikes()
    letters: dict[str, tuple[str, ...]] = {}
    for char, targets in looks_like.items():
        found = sorted(target for target in targets if target.isalpha())
        if found:
            letters[char] = tuple(t.upper() if char.isupper() else t for t in found)
    letters.update(
        (char, ("",)) for char, folded in _ignorables_and_dashes().items() if folded == ""
    )
    return letters


def look_alike_letters() -> dict[str, tuple[str, ...]]:
    """Non-ASCII characters that pass for Latin letters, and the letters each passes for."""
    return {char: letters for char, letters in _name_letters().items() if letters != ("",)}


def ignorable_characters() -> frozenset[str]:
    """Default-ignorable characters: renderers hide them, so they can split a word unseen."""
    return frozenset(char for char, folded in _ignorables_and_dashes().items() if folded == "")


#: Spellings tried for one name at most: each ambiguous look-alike doubles them.
_MAX_NAME_SPELLINGS: Final = 16


def name_spellings(name: str) -> list[str]:
    """``name`` as the name rules read it: NFKC, invisible characters removed and look-alike
    letters replaced, so "pho\u00adne" and "ph\u043ene" read as "phone". A look-alike of
    several letters gives one spelling for each (up to :data:`_MAX_NAME_SPELLINGS`)."""
    if name.isascii():
        return [name]
    letters = _name_letters()
    choices = [letters.get(char, (char,)) for char in unicodedata.normalize("NFKC", name)]
    spellings = itertools.islice(itertools.product(*choices), _MAX_NAME_SPELLINGS)
    return ["".join(spelling) for spelling in spellings]


def prepare() -> None:
    """Build the folding tables now (a fraction of a second), so the first request does not."""
    _folding()
    _name_letters()


def fold(text: str) -> str:
    """``text`` in the one spelling keys are compared in (see the module docstring)."""
    folding = _folding()
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
        if folding.unusual.search(text) is not None:
            for char in folding.others.keys() & set(text):
                text = text.replace(char, folding.others[char])
    # ASCII bytes are folded in place; the bytes of other characters are all >= 0x80.
    return (
        text.encode("utf-8", "surrogatepass")
        .translate(folding.ascii)
        .decode("utf-8", "surrogatepass")
    )


def fold_with_offsets(text: str) -> tuple[str, list[int]]:
    """:func:`fold` character by character, with the index in ``text`` each folded character
    came from (for masking what was found in the original)."""
    folding = _folding()
    folded: list[str] = []
    origins: list[int] = []
    for index, char in enumerate(text):
        for piece in unicodedata.normalize("NFKC", char):
            piece = folding.others.get(piece, piece)
            for out in piece:
                folded.append(chr(folding.ascii[ord(out)]) if out.isascii() else out)
                origins.append(index)
    return "".join(folded), origins


@dataclass(frozen=True)
class ValueMatcher:
    """Finds any of a set of keys in folded text, on token boundaries."""

    folded: tuple[str, ...]
    pattern: re.Pattern[str] | None

    def search(self, folded_text: str) -> re.Match[str] | None:
        """The first key in ``folded_text`` (the result of :func:`fold`), or None."""
        if self.pattern is None or not any(key in folded_text for key in self.folded):
            return None
        return self.pattern.search(folded_text)

    def finditer(self, folded_text: str) -> Iterator[re.Match[str]]:
        """Every key in ``folded_text``."""
        if self.pattern is not None:
            yield from self.pattern.finditer(folded_text)


@lru_cache(maxsize=1024)
def value_matcher(values: tuple[str, ...]) -> ValueMatcher:
    """The matcher of ``values`` (the learner's key and the keys linked to it)."""
    folded = tuple(sorted({fold(value) for value in values if value}))
    return ValueMatcher(folded, mention_pattern(folded))


# Keys written in text.

_JSON_KEY: Final = re.compile(r'"((?:[^"\\\n]|\\.){1,200})"\s*:')
_PYTHON_KEY: Final = re.compile(r"'((?:[^'\\\n]|\\.){1,200})'\s*:")
_BARE_KEY: Final = re.compile(
    r"(?:^|(?<=[\n\x00{,;(\[|\"']))[ \t]*(?:[-*+][ \t]+)?(?:\*\*|__|\*|_)?"
    r"([^\W\d_][\w.-]{0,63}(?: [^\W\d_][\w.-]{0,31}){0,3}?)"
    r"(?:\*\*|__|\*|_)?[ \t]*[:=](?![:=/])"
)
"""A bare key: after the start of the text, a line break, a NUL between strings, an opening
bracket, a separator or a quote, maybe indented or bulleted, maybe in bold or italics
(``**Email**:``), one to four words of any script ("Họ tên", "Số điện thoại", "SĐT"), then the
``:`` or ``=`` after it (not ``::``, ``==``, ``://``). Nothing in it starts another key, so each
key start is tried once and the search is linear however long the indentation."""
_FULL_WIDTH: Final = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
_HAS_FULL_WIDTH: Final = re.compile("[\uff01-\uff5e]")
"""Full-width ASCII forms as ASCII, one character for one, so keys are found where they are."""


@dataclass(frozen=True)
class TextKey:
    """A field name written in text."""

    start: int
    """Where the key starts (its opening quote, if quoted)."""
    end: int
    """Where the key ends (after its closing quote, if quoted)."""
    value_start: int
    """Just after the ``:`` or ``=`` that follows it."""
    name: str
    """The name, escapes decoded."""
    spaced: bool = False
    """A bare key of several words ("Họ tên"), which prose can look like."""


def _quoted_name(raw: str, quote: str) -> str:
    if quote == "'":
        raw = raw.replace('"', '\\"').replace("\\'", "'")
    try:
        name: str = json.loads(f'"{raw}"')
    except ValueError:
        return raw
    return name


def text_keys(text: str) -> Iterator[TextKey]:
    """The field names written in ``text``: JSON keys (``"email":``, even in JSON cut short),
    Python dict keys (``'email':``) and bare ``email:`` / ``email=`` at the start of a line or
    a quoted string, or after ``{ , ; ( [ |``, in full-width forms too."""
    if '"' in text:
        for match in _JSON_KEY.finditer(text):
            name = _quoted_name(match.group(1), '"')
            yield TextKey(match.start(), match.end(1) + 1, match.end(), name)
    if "'" in text:
        for match in _PYTHON_KEY.finditer(text):
            name = _quoted_name(match.group(1), "'")
            yield TextKey(match.start(), match.end(1) + 1, match.end(), name)
    if not text.isascii() and _HAS_FULL_WIDTH.search(text) is not None:
        text = text.translate(_FULL_WIDTH)
    if ":" in text or "=" in text:
        for bare in _BARE_KEY.finditer(text):
            name = bare.group(1)
            yield TextKey(bare.start(1), bare.end(1), bare.end(), name, spaced=" " in name)


# Encodings.

_PERCENT_ESCAPE: Final = r"%[0-9A-Fa-f]{2}"
_HTML_REFERENCE: Final = r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?"
_STRING_ESCAPE: Final = r"\\(?:u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|x[0-9A-Fa-f]{2}|[\"'\\/nrtbf])"
_PERCENT: Final = re.compile(_PERCENT_ESCAPE)
_ENTITY: Final = re.compile(_HTML_REFERENCE)
_ESCAPE: Final = re.compile(
    r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|x([0-9A-Fa-f]{2})|([\"'\\/])|([nrtbf]))"
)
_TOKEN: Final = re.compile(f"{_PERCENT_ESCAPE}|{_HTML_REFERENCE}|{_STRING_ESCAPE}")
_CONTROL_ESCAPES: Final = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}
_BASE64: Final = re.compile(r"[A-Za-z0-9+/_-]{11,}={0,2}")
"""A base64 run of at least 11 characters: the base64 of the shortest key (8 bytes) is that
long; both alphabets (``+/`` and ``-_``)."""
_CHUNK: Final = re.compile(r"[^\s\x00]+")
_AROUND: Final = "\"'()[]{}<>,"


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1) or match.group(2) or match.group(3)
    if code is None:
        control = match.group(5)
        return _CONTROL_ESCAPES[control] if control else match.group(4)
    value = int(code, 16)
    return chr(value) if value <= sys.maxunicode else ""


def _decode_base64(run: str) -> str | None:
    # Two replaces, not str.translate: a mapping table costs ten times as much on these runs.
    body = run.rstrip("=").replace("-", "+").replace("_", "/")
    if len(body) % 4 == 1:
        body = body[:-1]
    # The run holds only base64 characters and is padded here, so decoding cannot fail.
    text = binascii.a2b_base64(body + "=" * (-len(body) % 4)).decode("utf-8", "replace")
    # Base64 that is not UTF-8 text holds no key; most runs that merely look like base64 (node
    # ids, hex digests, long words) end here.
    return None if "\ufffd" in text else text


def _decode_tokens(text: str) -> str:
    return unquote(html.unescape(_ESCAPE.sub(_unescape, text)), errors="replace")


def decodings(text: str) -> Iterator[str]:
    """What ``text`` reads as once decoded: whole, with its string escapes, HTML references or
    percent escapes decoded (each encoding alone; encodings inside each other are found by
    decoding what this yields again), and each base64 run on its own."""
    if "\\" in text and _ESCAPE.search(text) is not None:
        yield _ESCAPE.sub(_unescape, text)
    if "&" in text and _ENTITY.search(text) is not None:
        yield html.unescape(text)
    if "%" in text and _PERCENT.search(text) is not None:
        yield unquote(text, errors="replace")
    seen: set[str] = set()
    for match in _BASE64.finditer(text):
        run = match.group()
        if run not in seen:
            seen.add(run)
            decoded = _decode_base64(run)
            if decoded:
                yield decoded


def decode_all(text: str) -> str:
    """``text`` with its string escapes, HTML references and percent escapes decoded."""
    return _decode_tokens(text) if _TOKEN.search(text) is not None else text


def encoded_chunks(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, decoded)`` of each encoded chunk of ``text`` (for masking): a run of
    non-space characters holding a percent escape, an HTML reference or a string escape, or a
    base64 run."""
    chunks: list[re.Match[str]] = []
    if _TOKEN.search(text) is not None:
        chunks.extend(match for match in _CHUNK.finditer(text) if _TOKEN.search(match.group()))
    chunks.extend(_BASE64.finditer(text))
    for match in chunks:
        # Brackets and quotes around a chunk are the text's, not the encoding's (its escape or
        # base64 characters are none of them, so something is always left).
        chunk = match.group().lstrip(_AROUND)
        start = match.end() - len(chunk)
        chunk = chunk.rstrip(_AROUND)
        decoded = _decode_tokens(chunk) if _TOKEN.search(chunk) else _decode_base64(chunk)
        if decoded and decoded != chunk:
            yield start, start + len(chunk), decoded
