"""A string as every rule of the gate reads it, worked out once and kept.

Each rule reads a string in its own form: the learner's keys in :func:`.text.fold`, field names
in the text as written, the circle and the contact shapes in :func:`.tokens.fold_plain` and its
words, and all of them again in what the string decodes to (:func:`.text.decodings`, three
encodings deep). A :class:`Reading` works each form out the first time a rule asks for it and
keeps it, with what the rules that depend on nothing but the string found (a forbidden key, a
contact shape).

The same strings come back build after build (node ids, curriculum titles, a learner's rendered
text while its data stays the same), so :func:`read` keeps the readings of recent strings, and
each reading remembers whether it passed for a circle and a set of keys (:func:`passes`). A
verdict is remembered under the circle's identity, a digest of its key and every fingerprint
(:attr:`.circle.Circle.identity`): a person linked or unlinked, or a name, phone or address
edited, is another circle, and nothing remembered for the old one applies to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Final, Generic, TypeVar

from nemo_context.gate.circle import Circle, digit_runs
from nemo_context.gate.names import is_forbidden_key
from nemo_context.gate.shapes import addresses, birth_dates, dates, emails, phones
from nemo_context.gate.text import MAX_DECODE_DEPTH, ValueMatcher, decodings, fold, text_keys
from nemo_context.gate.tokens import (
    Token,
    fold_plain,
    origins_of,
    soft_fold,
    spaced_words,
    tokens,
)

_WORD: Final = re.compile(r"[a-z0-9]+")
_JOINERS: Final = str.maketrans("", "", " .-_")
_SHAPES: Final = (emails, phones, addresses, birth_dates)
_VERDICTS_KEPT: Final = 8
"""Circles and key sets a reading remembers its verdict for (the builds of a few learners at once
read the same node titles)."""


_T = TypeVar("_T")


class _once(Generic[_T]):  # a decorator, named like functools.cached_property
    """A reading's form worked out the first time it is read and kept on the reading.

    As ``functools.cached_property``, which in Python 3.11 takes a lock on every first read: a
    reading's forms are each read once, so the lock was most of their cost. Two threads that
    read one form at once both work it out, to the same value."""

    def __init__(self, work: Callable[[Reading], _T]) -> None:
        self._work = work
        self._name = work.__name__

    def __get__(self, reading: Reading, owner: type[Reading] | None = None) -> _T:
        value = self._work(reading)
        reading.__dict__[self._name] = value
        return value


class Reading:
    """One string and the forms the gate's rules read it in, each worked out when first asked."""

    def __init__(self, text: str, depth: int = 0) -> None:
        self.text = text
        self.depth = depth
        """How many encodings deep the string was found (0: as written)."""
        self.verdicts: dict[tuple[bytes, tuple[str, ...], bool, tuple[str, ...]], bool] = {}
        """Whether it passed, by circle (its identity), keys looked for and how keys were read."""

    @_once
    def folded(self) -> str:
        """:func:`.text.fold` of the string: where the learner's keys are looked for."""
        return fold(self.text)

    @_once
    def plain(self) -> str:
        """:func:`.tokens.fold_plain` of the string: where identifiers are looked for."""
        return fold_plain(self.text)

    @_once
    def origins(self) -> list[int]:
        """For each character of :attr:`plain`, where in the string it came from."""
        return origins_of(self.text)

    def written(self, start: int, end: int) -> str:
        """The word at ``plain[start:end]`` as written, diacritics kept (:func:`.tokens.soft_fold`)
        and the spaces of a word written letter by letter left out."""
        origins = self.origins
        return soft_fold(self.text[origins[start] : origins[end - 1] + 1]).translate(_JOINERS)

    @_once
    def words(self) -> frozenset[str]:
        """The distinct words of :attr:`plain`."""
        return frozenset(_WORD.findall(self.plain))

    @_once
    def tokens(self) -> list[Token]:
        """The words of :attr:`plain`, each with where it is."""
        return tokens(self.plain)

    @_once
    def spaced(self) -> list[Token]:
        """The words written letter by letter ("T r a n"), as their letters run together."""
        return spaced_words(self.plain)

    def places(self, word: str) -> list[tuple[int, int]]:
        """Where ``word`` stands in :attr:`plain` as a word."""
        pattern = rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])"
        return [match.span() for match in re.finditer(pattern, self.plain)]

    @_once
    def dates(self) -> tuple[str, ...]:
        """Every calendar date written in the string, as ``YYYY-MM-DD``."""
        return tuple(day for _, _, day in dates(self.plain))

    @_once
    def digit_runs(self) -> tuple[str, ...]:
        """The digits of every run long enough to be a phone number."""
        return tuple(digits for _, _, digits in digit_runs(self.plain))

    @_once
    def decoded(self) -> tuple[Reading, ...]:
        """What the string decodes to, each read in turn (none below the deepest encoding)."""
        if self.depth >= MAX_DECODE_DEPTH:
            return ()
        return tuple(Reading(text, self.depth + 1) for text in decodings(self.text))

    @_once
    def shaped(self) -> bool:
        """Whether anyone's contact data is written in it (see :mod:`.shapes`)."""
        plain = self.plain
        return any(next(shape(plain), None) is not None for shape in _SHAPES)

    @_once
    def keyed(self) -> bool:
        """Whether a forbidden field name is written in it as a key (see :mod:`.text`)."""
        return any(is_forbidden_key(key) for key in text_keys(self.text))

    @_once
    def keyed_in_object(self) -> bool:
        """Whether a forbidden field name is written in it as a key inside an object
        (``{"email": ...}``), how curriculum titles are read."""
        return any(
            _in_object(self.text, key.start) and is_forbidden_key(key)
            for key in text_keys(self.text)
        )

    def nodes(self) -> Iterator[Reading]:
        """This reading and every reading of what it decodes to, at any depth."""
        yield self
        for decoded in self.decoded:
            yield from decoded.nodes()


def _in_object(text: str, start: int) -> bool:
    """Whether the key starting at ``start`` follows an opening brace or bracket or a comma."""
    position = start - 1
    while position >= 0 and text[position].isspace():
        position -= 1
    return position >= 0 and text[position] in "{[,"


class Kept:
    """The readings of recent strings, within a budget of characters: the oldest are dropped
    first (the strings a build brings back are read again soon, or not at all)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._readings: dict[str, Reading] = {}
        self.characters = 0
        """The characters of the strings kept."""

    def read(self, text: str) -> Reading:
        """The reading of ``text``: kept from an earlier call, or new (and kept, within budget)."""
        found = self._readings.get(text)
        if found is not None:
            return found
        found = Reading(text)
        if len(text) <= self.budget:
            while self.characters + len(text) > self.budget:
                self.characters -= len(self._readings.pop(next(iter(self._readings))).text)
            self._readings[text] = found
            self.characters += len(text)
        return found

    def forget(self) -> None:
        """Drop every reading kept."""
        self._readings.clear()
        self.characters = 0


_KEPT: Final = Kept(budget=2_000_000)
"""The readings the gate keeps: two million characters, a few megabytes with their forms."""


def read(text: str) -> Reading:
    """The reading of ``text``, kept from an earlier call when the same string came back."""
    return _KEPT.read(text)


def forget() -> None:
    """Drop every kept reading, as a new process starts (what ``make bench`` measures first)."""
    _KEPT.forget()


def passes(
    reading: Reading,
    matcher: ValueMatcher,
    circle: Circle,
    *,
    keys_anywhere: bool = True,
    quoted: tuple[str, ...] = (),
) -> bool:
    """Whether the string breaks none of the gate's rules, as written or decoded: none of
    ``matcher``'s keys, no forbidden field name written in it as a key (see :func:`key_rule`
    for ``keys_anywhere`` and ``quoted``), nothing of ``circle`` and no contact data.
    Remembered per circle, matcher and way of reading keys."""
    remembered = (circle.identity, matcher.folded, keys_anywhere, quoted)
    verdict = reading.verdicts.get(remembered)
    if verdict is None:
        verdict = key_rule(
            reading, matcher, keys_anywhere=keys_anywhere, quoted=quoted
        ) is None and not any(node.shaped or circle.finds(node) for node in reading.nodes())
        _remember(reading, remembered, verdict)
    return verdict


def all_pass(
    texts: Iterable[str],
    matcher: ValueMatcher,
    circle: Circle,
    *,
    keys_anywhere: bool = True,
    quoted: tuple[str, ...] = (),
) -> bool:
    """Whether every one of ``texts`` :func:`passes`. Those without a remembered verdict are
    read first as one text, joined by NUL, which no rule reads across (a key, a word, a
    separator and a line all end there): when the joined text passes, so does each of them,
    and each is remembered to. The same strings come back together (the titles and node ids of
    a purpose), so a new circle reads them at once, not one by one."""
    remembered = (circle.identity, matcher.folded, keys_anywhere, quoted)
    unknown: list[Reading] = []
    for reading in map(read, set(texts)):
        verdict = reading.verdicts.get(remembered)
        if verdict is None:
            unknown.append(reading)
        elif not verdict:
            return False
    if not unknown:
        return True
    joined = read("\0".join(sorted(reading.text for reading in unknown)))
    if passes(joined, matcher, circle, keys_anywhere=keys_anywhere, quoted=quoted):
        for reading in unknown:
            _remember(reading, remembered, True)
        return True
    return all(
        passes(reading, matcher, circle, keys_anywhere=keys_anywhere, quoted=quoted)
        for reading in unknown
    )


def _remember(
    reading: Reading,
    remembered: tuple[bytes, tuple[str, ...], bool, tuple[str, ...]],
    verdict: bool,
) -> None:
    if len(reading.verdicts) >= _VERDICTS_KEPT:
        reading.verdicts.pop(next(iter(reading.verdicts)))
    reading.verdicts[remembered] = verdict


def key_rule(
    reading: Reading,
    matcher: ValueMatcher,
    *,
    keys_anywhere: bool = True,
    quoted: tuple[str, ...] = (),
) -> str | None:
    """The rule the string breaks with a key, or None: one of ``matcher``'s keys as written
    (``value``) or decoded (``encoded_value``), or a forbidden field name written as a key
    (``key_in_text``). The first one met, reading each text before what it decodes to.

    With ``keys_anywhere`` False only keys inside an object count (``{"email": ...}``), as
    curriculum titles are read; a key inside one of the ``quoted`` titles where the string quotes
    it (the rendered text names them) is the title's, read there, and not the string's."""
    for node in reading.nodes():
        if matcher.search(node.folded) is not None:
            return "value" if node.depth == 0 else "encoded_value"
        if not keys_anywhere:
            if node.keyed_in_object:
                return "key_in_text"
        elif node.keyed and (not quoted or _keyed_outside(node.text, quoted)):
            return "key_in_text"
    return None


def _keyed_outside(text: str, titles: tuple[str, ...]) -> bool:
    """Whether a forbidden field name is written in ``text`` as a key outside every place where
    it quotes one of ``titles``."""
    return any(
        is_forbidden_key(key) and not _within(text, key.start, key.end, titles)
        for key in text_keys(text)
    )


def _within(text: str, start: int, end: int, titles: tuple[str, ...]) -> bool:
    """Whether ``text[start:end]`` lies inside a place where ``text`` quotes one of ``titles``."""
    for title in titles:
        place = text.find(title, max(0, end - len(title)))
        if 0 <= place <= start:
            return True
    return False
