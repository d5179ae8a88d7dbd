"""What `make mutate` reads: the rule modules (``modules.toml``) and the argued equivalent
mutants (``equivalent.toml``)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from mutation.mutants import Mutant


@dataclass(frozen=True)
class RuleModule:
    """A rule module: its source files, scored together, and the fast tests that judge them."""

    slug: str
    name: str
    sources: tuple[str, ...]
    tests: tuple[str, ...]
    conftest: bool = True
    """False runs the tests without any conftest.py (tests that need none of their fixtures)."""

    @property
    def arguments(self) -> tuple[str, ...]:
        """What pytest is given: the tests, and whether to load conftest files."""
        return self.tests if self.conftest else (*self.tests, "--noconftest")


def load_modules(path: Path) -> tuple[float, list[RuleModule]]:
    """The threshold (percent) and the modules."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    modules = [
        RuleModule(
            row["slug"],
            row["name"],
            tuple(row["sources"]),
            tuple(row["tests"]),
            row.get("conftest", True),
        )
        for row in data["module"]
    ]
    return float(data["threshold"]), modules


_FIELDS = ("file", "scope", "operator", "before", "after", "id")


@dataclass(frozen=True)
class Equivalent:
    """Mutants that one argument shows to be equivalent, selected by their fields (each a
    pattern where ``*`` matches any text): the file, the scope, the operator, the code before
    and after, and the whole id (to tell apart the same change made at several sites, ``#n``)."""

    selector: tuple[tuple[str, str], ...]
    why: str

    def covers(self, mutant: Mutant) -> bool:
        values = dict(zip(_FIELDS, mutant_fields(mutant), strict=True))
        return all(
            glob_pattern(pattern).fullmatch(values[field]) for field, pattern in self.selector
        )

    def __str__(self) -> str:
        return ", ".join(f"{field} = {pattern!r}" for field, pattern in self.selector)


def mutant_fields(mutant: Mutant) -> tuple[str, str, str, str, str, str]:
    return (mutant.path, mutant.scope, mutant.operator, mutant.before, mutant.after, mutant.id)


@dataclass(frozen=True)
class Equivalents:
    entries: tuple[Equivalent, ...]

    def covers(self, mutant: Mutant) -> bool:
        return any(entry.covers(mutant) for entry in self.entries)

    def unmatched(self, mutants: Collection[Mutant], sources: Collection[str]) -> list[Equivalent]:
        """The entries about one of ``sources`` that select none of ``mutants``."""
        return [
            entry
            for entry in self.entries
            if any(
                glob_pattern(dict(entry.selector)["file"]).fullmatch(source) for source in sources
            )
            and not any(entry.covers(mutant) for mutant in mutants)
        ]


def glob_pattern(pattern: str) -> re.Pattern[str]:
    """``*`` matches any text; every other character, brackets included, only itself."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def load_equivalents(path: Path) -> Equivalents:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = []
    for row in data.get("equivalent", ()):
        why = " ".join(str(row.get("why", "")).split())
        unknown = set(row) - {*_FIELDS, "why"}
        if unknown or "file" not in row or not why:
            raise ValueError(f"{path}: an entry needs a file and its argument, and takes only "
                             f"{', '.join(_FIELDS)} and why: {row}")  # fmt: skip
        selector = tuple((field, str(row[field])) for field in _FIELDS if field in row)
        entries.append(Equivalent(selector, why))
    return Equivalents(tuple(entries))
