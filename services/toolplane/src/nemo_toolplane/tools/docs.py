"""Docs domain: search and read this project's own documentation without loading whole pages."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from nemo_toolplane.docs.library import DocNotFound
from nemo_toolplane.envelope import ErrorCode, ToolError
from nemo_toolplane.registry import AnyTool, ToolDefinition
from nemo_toolplane.tool_call import ToolCall
from nemo_toolplane.tool_kinds import Mode, Risk, Scope


class SearchDocsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1, max_length=500, description="Keywords; Vietnamese diacritics are optional."
    )
    limit: int = Field(5, ge=1, le=10, description="Most hits to return, 1 to 10.")


class DocsHit(BaseModel):
    path: str = Field(description="Path of the page in the repository, e.g. docs/toolplane/mcp.md.")
    title: str
    heading_path: list[str] = Field(description="Page title, then the H2 section heading.")
    url: str
    score: float
    snippet: str = Field(description="About 800 characters around the first match.")


class SearchDocsResult(BaseModel):
    hits: list[DocsHit]


class GetDocArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        max_length=300,
        description="Page path with or without .md and docs/, or the page's docs URL.",
    )
    section: str | None = Field(
        None, max_length=200, description="An H2 heading (or its anchor) to return only that part."
    )


class GetDocResult(BaseModel):
    path: str
    title: str
    url: str
    sections: list[str] = Field(description="The page's H2 headings, in order.")
    section: str | None = Field(description="The section returned, or null for the whole page.")
    content: str = Field(description="Markdown of the page or of the section.")


async def _search(call: ToolCall, args: SearchDocsArgs) -> SearchDocsResult:
    hits = await call.docs.search(args.query, args.limit)
    return SearchDocsResult.model_validate(
        {
            "hits": [
                {
                    "path": hit.page.path,
                    "title": hit.page.title,
                    "heading_path": [
                        hit.page.title,
                        *([hit.section.heading] if hit.section.heading else []),
                    ],
                    "url": call.docs.url(hit.page, hit.section),
                    "score": hit.score,
                    "snippet": hit.snippet,
                }
                for hit in hits
            ]
        }
    )


async def _get(call: ToolCall, args: GetDocArgs) -> GetDocResult:
    try:
        page, fragment = await call.docs.page(args.path)
    except DocNotFound as missing:
        raise ToolError(ErrorCode.RESOURCE_NOT_FOUND, str(missing)) from None
    wanted = args.section or fragment
    if wanted is None:
        return GetDocResult(
            path=page.path,
            title=page.title,
            url=call.docs.url(page),
            sections=page.headings,
            section=None,
            content=page.content,
        )
    section = page.section(wanted)
    if section is None:
        raise ToolError(
            ErrorCode.RESOURCE_NOT_FOUND,
            f"{page.path} has no section {wanted!r}",
            details={"sections": page.headings},
        )
    return GetDocResult(
        path=page.path,
        title=page.title,
        url=call.docs.url(page, section),
        sections=page.headings,
        section=section.heading,
        content=section.content,
    )


TOOLS: tuple[AnyTool, ...] = (
    ToolDefinition(
        name="docs.search_docs",
        version=1,
        description="Search the project's docs (BM25, titles and headings weigh more, Vietnamese "
        "diacritics optional); each hit has a snippet and the section to read next.",
        risk=Risk.LOW,
        mode=Mode.READ,
        input_model=SearchDocsArgs,
        output_model=SearchDocsResult,
        execute=_search,
        scope=Scope.DOCS_READ,
    ),
    ToolDefinition(
        name="docs.get_doc",
        version=1,
        description="One docs page with its list of H2 sections, or only one section.",
        risk=Risk.LOW,
        mode=Mode.READ,
        input_model=GetDocArgs,
        output_model=GetDocResult,
        execute=_get,
        scope=Scope.DOCS_READ,
    ),
)
