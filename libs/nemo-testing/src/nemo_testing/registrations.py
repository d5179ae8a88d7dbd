"""Test tables kept beside a registry: a fixture per prompt or per tool (its variables, its
scripted answer, the slice it returns).

A table written by hand goes stale silently: a new prompt that no table names is simply not
tested. These helpers make such a table hold exactly the names its registry says need an entry,
and say what to add and where when it does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class Table:
    """A test table: where it is (``NAME in path``) and what one entry holds."""

    where: str
    entry: str

    def missing(self, name: str) -> str:
        return f"{name} has no entry in {self.where}: add {self.entry}"

    def gaps(self, names: Iterable[str], registered: Iterable[str]) -> str:
        """Why ``names`` are not exactly ``registered``: what to add and what to remove, one
        line each; empty when they are."""
        have, wanted = set(names), set(registered)
        lines = [self.missing(name) for name in sorted(wanted - have)]
        lines += [
            f"{name} is in {self.where} but not registered: remove it"
            for name in sorted(have - wanted)
        ]
        return "\n".join(lines)

    def entry_of(self, table: Mapping[str, V], name: str) -> V:
        """The entry of ``name``; an AssertionError that says what to add when there is none."""
        if name not in table:
            raise AssertionError(self.missing(name))
        return table[name]
