"""The docs domain: corpus splitting, diacritics folding, BM25 search with weighted headings,
reading pages and sections, and the lazy index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nemo_toolplane.docs.corpus import load_corpus, parse_page, slugify
from nemo_toolplane.docs.library import (
    SNIPPET_CHARS,
    DocNotFound,
    DocsLibrary,
    snippet,
    words_pattern,
)
from services.toolplane.tests.conftest import REPOSITORY, AgentTokens, RunningToolPlane
from services.toolplane.tests.mcp_http import error_envelope

PAGE = """---
title: Đăng nhập và xác thực
owner: team-ai
---

# A different H1

Intro paragraph about tokens.

## Cấp token

Operators issue tokens.

```sh
## not a heading, inside a code block
nemo issue-token learning-agent
```

### Thu hồi

Revoking stops the token.

## Errors

An unknown token is 401.
"""


def test_pages_split_at_h2_outside_code_blocks() -> None:
    page = parse_page("docs/auth/login.md", "auth/login", PAGE)
    assert page.title == "Đăng nhập và xác thực"
    assert page.headings == ["Cấp token", "Errors"]
    intro, issue, errors = page.sections
    assert intro.heading is None
    assert intro.content.startswith("# A different H1")
    assert "## not a heading" in issue.content
    assert issue.subheadings == ("Thu hồi",)
    assert errors.content == "## Errors\n\nAn unknown token is 401."
    assert "owner: team-ai" not in page.content
    assert (issue.anchor, slugify("Phê duyệt (approvals)")) == ("cap-token", "phe-duyet-approvals")
    assert page.section("cap token") is issue
    assert page.section("#errors") is errors
    assert page.section("missing") is None


def test_the_title_falls_back_to_the_h1_then_the_file_name() -> None:
    assert parse_page("docs/a.md", "a", "# Heading one\n\ntext").title == "Heading one"
    assert parse_page("docs/run-book.md", "run-book", "text only").title == "run book"


@pytest.fixture
def library(tmp_path: Path) -> DocsLibrary:
    (tmp_path / "auth").mkdir()
    (tmp_path / "auth" / "login.md").write_text(PAGE, encoding="utf-8")
    (tmp_path / "deploy.md").write_text(
        "---\ntitle: Deploy\n---\n\n## Images\n\nEach service has one image. "
        + "Filler words about containers and manifests. " * 40
        + "The token secret is mounted from a file.\n\n## Rollout\n\nUse kustomize overlays.\n",
        encoding="utf-8",
    )
    (tmp_path / "tokens-everywhere.md").write_text("## Notes\n\n" + "token " * 30, encoding="utf-8")
    return DocsLibrary(tmp_path, "https://docs.example.test/")


async def test_search_folds_diacritics_and_weighs_titles_and_headings(
    library: DocsLibrary,
) -> None:
    hits = await library.search("xac thuc", 5)
    assert next((hit.page.path, hit.section.heading) for hit in hits)[0] == "docs/auth/login.md"
    # "token" is everywhere in the third page's body, but a heading beats body text.
    best = (await library.search("cap token", 1))[0]
    assert (best.page.key, best.section.heading) == ("auth/login", "Cấp token")
    assert await library.search("???", 5) == []
    assert await library.search("zebra", 5) == []
    assert len(await library.search("token", 2)) == 2


async def test_snippets_are_cut_around_the_first_match(library: DocsLibrary) -> None:
    [hit] = await library.search("secret mounted", 1)
    assert hit.page.key == "deploy"
    assert "token secret is mounted" in hit.snippet
    assert hit.snippet.startswith("…")
    assert len(hit.snippet) <= SNIPPET_CHARS + 2
    assert snippet("short text", words_pattern(["nothing"])) == "short text"


async def test_pages_are_found_by_path_forms_and_urls(library: DocsLibrary) -> None:
    for reference in (
        "auth/login",
        "auth/login.md",
        "docs/auth/login.md",
        "/docs/auth/login",
        "https://docs.example.test/auth/login",
    ):
        page, fragment = await library.page(reference)
        assert (page.key, fragment) == ("auth/login", None)
    page, fragment = await library.page("https://docs.example.test/auth/login.md#errors")
    assert fragment == "errors"
    for missing in ("auth/logout", "https://elsewhere.test/auth/login", "../../etc/passwd"):
        with pytest.raises(DocNotFound):
            await library.page(missing)


async def test_the_index_is_built_on_the_first_docs_call(library: DocsLibrary) -> None:
    assert library._index is None
    await library.search("token", 1)
    assert library._index is not None


def test_the_repository_docs_are_a_corpus() -> None:
    pages = {page.path: page for page in load_corpus(REPOSITORY / "docs")}
    assert "docs/toolplane/mcp-edge.md" in pages
    assert pages["docs/toolplane/mcp-edge.md"].title == "MCP edge"
    assert "Xác thực (authentication)" in pages["docs/toolplane/mcp-edge.md"].headings


async def test_search_docs_over_mcp(toolplane: RunningToolPlane, tokens: AgentTokens) -> None:
    async with toolplane.mcp(tokens.research) as client:
        result = await client.call_tool("docs.search_docs", {"query": "xac thuc bearer token"})
        default = await client.call_tool("docs.search_docs", {"query": "audit"})
        too_many = await client.call_tool("docs.search_docs", {"query": "audit", "limit": 0})
    hits = result.structured_content["hits"]
    assert hits[0]["path"] == "docs/toolplane/mcp-edge.md"
    assert hits[0]["heading_path"] == ["MCP edge", "Xác thực (authentication)"]
    assert hits[0]["url"] == "https://docs.nemo12.com/toolplane/mcp-edge#xac-thuc-authentication"
    assert hits[0]["score"] > 0
    assert "Bearer" in hits[0]["snippet"]
    assert len(default.structured_content["hits"]) == 5
    assert error_envelope(too_many)["error"]["code"] == "VALIDATION_ERROR"


async def test_get_doc_over_mcp(toolplane: RunningToolPlane, tokens: AgentTokens) -> None:
    async with toolplane.mcp(tokens.research) as client:
        whole = await client.call_tool("docs.get_doc", {"path": "docs/toolplane/audit.md"})
        section = await client.call_tool(
            "docs.get_doc", {"path": "toolplane/audit", "section": "graceful shutdown"}
        )
        by_url = await client.call_tool(
            "docs.get_doc", {"path": "https://docs.nemo12.com/toolplane/audit#reading-the-log"}
        )
        missing: Any = await client.call_tool("docs.get_doc", {"path": "toolplane/nothing"})
        no_section: Any = await client.call_tool(
            "docs.get_doc", {"path": "toolplane/audit", "section": "nope"}
        )
    page = whole.structured_content
    assert page["title"] == "Audit log"
    assert page["section"] is None
    assert page["sections"][-1] == "Reading the log"
    assert page["content"].startswith("# Audit log")
    assert section.structured_content["section"] == "Graceful shutdown"
    assert section.structured_content["content"].startswith("## Graceful shutdown")
    assert by_url.structured_content["section"] == "Reading the log"
    assert error_envelope(missing)["error"]["code"] == "RESOURCE_NOT_FOUND"
    error = error_envelope(no_section)["error"]
    assert error["code"] == "RESOURCE_NOT_FOUND"
    assert error["details"]["sections"] == page["sections"]
