"""Dockerfiles read as build stages, for the image tests."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [argument for word, argument in self.instructions if word == keyword]


def parse_stages(path: Path) -> list[Stage]:
    """The build stages of a Dockerfile: continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    stages: list[Stage] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, argument = line.partition(" ")
        keyword, argument = keyword.upper(), " ".join(argument.split())
        if keyword == "FROM":
            base, _, alias = argument.partition(" AS ")
            stages.append(Stage(base, alias or None))
        else:
            stages[-1].instructions.append((keyword, argument))
    return stages
