"""Search and read the docs corpus: BM25 over H2 sections, diacritics folded.

The index is built on the first docs call of the process (the other tools never pay for it):
each section is one BM25 document whose tokens repeat the page title and the section's headings,
so a match there weighs more than one in the body. A hit carries a snippet of about 800
characters cut from the original text around the first matching word.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import bm25s
import numpy

from nemo_core.text import fold_with_positions, words
from nemo_toolplane.docs.corpus import DocPage, DocSection, load_corpus

logger = logging.getLogger(__name__)
# bm25s pins its logger at DEBUG on import; let it follow the service's log level instead.
logging.getLogger("bm25s").setLevel(logging.NOTSET)

TITLE_WEIGHT = 3
HEADING_WEIGHT = 2
SNIPPET_CHARS = 800
#: How much of the snippet comes before the match.
SNIPPET_LEAD = 200


@dataclass(frozen=True)
class DocHit:
    page: DocPage
    section: DocSection
    score: float
    snippet: str


class DocNotFound(LookupError):
    """No page (or no section of the page) has that name."""


@dataclass(frozen=True)
class _Index:
    pages: dict[str, DocPage]
    units: list[tuple[DocPage, DocSection]]
    bm25: bm25s.BM25


def _unit_tokens(page: DocPage, section: DocSection) -> list[str]:
    headings = [section.heading or "", *section.subheadings]
    return (
        words(page.title) * TITLE_WEIGHT
        + [token for heading in headings for token in words(heading)] * HEADING_WEIGHT
        + words(section.content)
    )


def _build(docs_dir: Path) -> _Index:
    if not docs_dir.is_dir():
        raise FileNotFoundError(f"docs directory {docs_dir} does not exist")
    pages = load_corpus(docs_dir)
    units = [(page, section) for page in pages for section in page.sections]
    for _, section in units:
        section.folded  # noqa: B018 - computed while indexing, not on the first search hit
    bm25 = bm25s.BM25()
    bm25.index([_unit_tokens(page, section) for page, section in units], show_progress=False)
    logger.info("docs index built", extra={"pages": len(pages), "sections": len(units)})
    return _Index({page.key: page for page in pages}, units, bm25)


def words_pattern(tokens: Iterable[str]) -> re.Pattern[str]:
    """Any of ``tokens`` as a whole folded word."""
    alternatives = "|".join(sorted(map(re.escape, set(tokens))))
    return re.compile(rf"(?<![a-z0-9])(?:{alternatives})(?![a-z0-9])")


def snippet(text: str, words: re.Pattern[str], folded: tuple[str, list[int]] | None = None) -> str:
    """About :data:`SNIPPET_CHARS` characters of ``text`` around the first of ``words``;
    ``folded`` is ``text`` already folded with positions, when the caller has it."""
    folded_text, origins = folded or fold_with_positions(text)
    match = words.search(folded_text)
    first = origins[match.start()] if match else None
    start = 0 if first is None else max(0, first - SNIPPET_LEAD)
    if start > 0:
        # Start at a word boundary rather than mid-word.
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < (first or start) else start
    end = min(len(text), start + SNIPPET_CHARS)
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > start else end
    cut = text[start:end].strip()
    return ("…" if start > 0 else "") + cut + ("…" if end < len(text) else "")


class DocsLibrary:
    """The docs tools' backend: a Markdown directory indexed on first use."""

    def __init__(self, docs_dir: Path, base_url: str) -> None:
        self._docs_dir = docs_dir
        self._base_url = base_url.rstrip("/")
        self._index: _Index | None = None
        self._lock = asyncio.Lock()

    async def _ready(self) -> _Index:
        if self._index is None:
            async with self._lock:
                if self._index is None:
                    self._index = await asyncio.to_thread(_build, self._docs_dir)
        return self._index

    def url(self, page: DocPage, section: DocSection | None = None) -> str:
        anchor = f"#{section.anchor}" if section is not None and section.anchor else ""
        return f"{self._base_url}/{page.key}{anchor}"

    async def search(self, query: str, limit: int) -> list[DocHit]:
        """The best ``limit`` sections for ``query``, best first; sections matching no word are
        left out."""
        index = await self._ready()
        tokens = words(query)
        if not tokens:
            return []
        scores = index.bm25.get_scores(tokens)
        matching = numpy.flatnonzero(scores > 0)
        # Best first; a stable sort keeps corpus order among equal scores.
        ranked = matching[numpy.argsort(-scores[matching], kind="stable")][:limit]
        wanted = words_pattern(tokens)
        hits = []
        for i in ranked:
            page, section = index.units[i]
            hits.append(
                DocHit(
                    page,
                    section,
                    round(float(scores[i]), 4),
                    snippet(section.content, wanted, section.folded),
                )
            )
        return hits

    async def page(self, reference: str) -> tuple[DocPage, str | None]:
        """The page a path or docs URL names, and the URL's fragment when it has one.

        Accepted: ``toolplane/policy``, ``toolplane/policy.md``, ``docs/toolplane/policy.md``,
        ``/docs/...``, and ``<base url>/toolplane/policy[.md][#section]``.
        """
        index = await self._ready()
        key, fragment = self._key(reference)
        page = index.pages.get(key)
        if page is None:
            raise DocNotFound(f"no docs page {reference!r}")
        return page, fragment

    def _key(self, reference: str) -> tuple[str, str | None]:
        reference = reference.strip()
        fragment = None
        if "://" in reference:
            parts = urlsplit(reference)
            base = urlsplit(self._base_url)
            if (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
                raise DocNotFound(f"{reference!r} is not a page of {self._base_url}")
            reference = parts.path.removeprefix(base.path.rstrip("/"))
            fragment = parts.fragment or None
        key = reference.strip("/").removeprefix("docs/").removesuffix(".md")
        return key, fragment
