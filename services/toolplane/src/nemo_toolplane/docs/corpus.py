"""The docs corpus: every ``*.md`` under the docs directory, split into H2 sections.

Front matter is dropped (its ``title:`` names the page; without one the first H1, else the file
name). Headings are found by a Markdown parser, so a ``## line`` inside a code block is text,
not a section. The part before the first H2 is the page's introduction section.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import yaml
from markdown_it import MarkdownIt

from nemo_core.text import fold, fold_with_positions

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?P<yaml>.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_PARSER = MarkdownIt("commonmark")


@dataclass(frozen=True)
class DocSection:
    """One H2 section (``heading`` None for the introduction before the first H2)."""

    heading: str | None
    anchor: str
    content: str
    #: Headings below H2 inside the section; they weigh more than body text in search.
    subheadings: tuple[str, ...]

    @cached_property
    def folded(self) -> tuple[str, list[int]]:
        """The folded content and the original index of each folded character (for snippets);
        computed once per section."""
        return fold_with_positions(self.content)


@dataclass(frozen=True)
class DocPage:
    """One Markdown page."""

    #: Path from the repository root, for example ``docs/toolplane/policy.md``.
    path: str
    #: Path inside the docs directory without ``.md``: the page's key and its URL path.
    key: str
    title: str
    content: str
    sections: tuple[DocSection, ...]

    @property
    def headings(self) -> list[str]:
        """The page's H2 headings, in order."""
        return [section.heading for section in self.sections if section.heading is not None]

    def section(self, name: str) -> DocSection | None:
        """The H2 section named by its heading or anchor, insensitive to case and diacritics."""
        wanted = fold(name.strip().lstrip("#").strip())
        for section in self.sections:
            if section.heading is not None and wanted in (fold(section.heading), section.anchor):
                return section
        return None


def slugify(heading: str) -> str:
    """The anchor of a heading: folded words joined by hyphens."""
    return "-".join(re.findall(r"[a-z0-9]+", fold(heading)))


def _split_front_matter(text: str) -> tuple[str | None, str]:
    match = _FRONT_MATTER.match(text)
    if match is None:
        return None, text
    try:
        data = yaml.safe_load(match.group("yaml"))
    except yaml.YAMLError:
        data = None
    title = data.get("title") if isinstance(data, dict) else None
    return (str(title) if title else None), text[match.end() :]


def parse_page(path: str, key: str, text: str) -> DocPage:
    """Split one page's Markdown into its title and sections."""
    title, body = _split_front_matter(text)
    lines = body.splitlines(keepends=True)
    tokens = _PARSER.parse(body)
    headings: list[tuple[int, int, str]] = []  # (level, first line, text)
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.map is not None:
            headings.append((int(token.tag[1]), token.map[0], tokens[index + 1].content.strip()))
    if title is None:
        title = next((text for level, _, text in headings if level == 1), None)
    title = title or Path(key).name.replace("-", " ").replace("_", " ")
    starts = [line for level, line, _ in headings if level == 2]
    bounds = [0, *starts, len(lines)]
    sections = []
    for start, end in itertools.pairwise(bounds):
        if start == end:
            continue
        h2 = next((t for level, line, t in headings if level == 2 and line == start), None)
        content = "".join(lines[start:end]).strip("\n")
        if h2 is None and not content.strip():
            continue
        subheadings = tuple(t for level, line, t in headings if level > 2 and start < line < end)
        sections.append(
            DocSection(
                heading=h2,
                anchor=slugify(h2) if h2 else "",
                content=content,
                subheadings=subheadings,
            )
        )
    return DocPage(
        path=path, key=key, title=title, content=body.strip("\n"), sections=tuple(sections)
    )


def load_corpus(docs_dir: Path) -> list[DocPage]:
    """Every Markdown page under ``docs_dir``, ordered by path."""
    pages = []
    for file in sorted(docs_dir.rglob("*.md")):
        relative = file.relative_to(docs_dir).as_posix()
        key = relative.removesuffix(".md")
        text = file.read_text(encoding="utf-8")
        pages.append(parse_page(f"docs/{relative}", key, text))
    return pages
