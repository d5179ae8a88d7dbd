"""Knowledge domain (Coral): search the curriculum knowledge graph and read one node, through the
context service. No learner data is involved."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from nemo_core.text import is_significant, words
from nemo_protos.context.v1 import knowledge_pb2
from nemo_toolplane.registry import AnyTool, ToolDefinition
from nemo_toolplane.tool_call import ToolCall
from nemo_toolplane.tool_kinds import Mode, Risk, Scope


def _searchable(query: str) -> str:
    # The context service matches words of two letters or more, and numbers (single letters are
    # variables or particles to it); a query with none would only come back refused.
    if not any(is_significant(word) for word in words(query)):
        raise ValueError("the query must contain a word of two letters or more, or a number")
    return query


class SearchKnowledgeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: Annotated[str, AfterValidator(_searchable)] = Field(
        min_length=1,
        max_length=200,
        description="Free text in Vietnamese or English; diacritics are optional. It must "
        "contain a word of two letters or more, or a number.",
    )
    limit: int = Field(10, ge=1, le=50, description="Most nodes to return.")
    subject: str | None = Field(None, max_length=40, description="Only this subject, e.g. math.")
    grade: int | None = Field(None, ge=1, le=12, description="Only this grade.")


class KnowledgeNode(BaseModel):
    node_id: str
    title: str = Field(description="Title, in Vietnamese.")
    aliases: list[str] = []
    subject: str = ""
    grade: int = 0
    strand: str = ""
    description: str = ""


class KnowledgeHit(KnowledgeNode):
    score: float = Field(description="Relevance; higher is better, comparable within one call.")


class SearchKnowledgeResult(BaseModel):
    nodes: list[KnowledgeHit]


class GetKnowledgeNodeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node_id: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$", description="Id of the node."
    )


class KnowledgeEdge(BaseModel):
    from_node_id: str
    to_node_id: str
    kind: str = Field(description='Relation, for example "prerequisite".')


class GetKnowledgeNodeResult(BaseModel):
    node: KnowledgeNode
    edges: list[KnowledgeEdge]


def _node(node: knowledge_pb2.KnowledgeNode) -> KnowledgeNode:
    return KnowledgeNode(
        node_id=node.node_id,
        title=node.title,
        aliases=list(node.aliases),
        subject=node.subject,
        grade=node.grade,
        strand=node.strand,
        description=node.description,
    )


async def _search(call: ToolCall, args: SearchKnowledgeArgs) -> SearchKnowledgeResult:
    response = await call.context_service.search_knowledge(
        args.query, args.limit, args.subject, args.grade
    )
    return SearchKnowledgeResult(
        nodes=[
            KnowledgeHit(**_node(hit.node).model_dump(), score=round(hit.score, 4))
            for hit in response.hits
        ]
    )


async def _get_node(call: ToolCall, args: GetKnowledgeNodeArgs) -> GetKnowledgeNodeResult:
    response = await call.context_service.knowledge_node(args.node_id)
    return GetKnowledgeNodeResult(
        node=_node(response.node),
        edges=[
            KnowledgeEdge(from_node_id=e.from_node_id, to_node_id=e.to_node_id, kind=e.kind)
            for e in response.edges
        ],
    )


TOOLS: tuple[AnyTool, ...] = (
    ToolDefinition(
        name="coral.search_knowledge",
        version=1,
        description="Search the curriculum knowledge graph by title or alias; returns nodes with "
        "subject, grade and strand.",
        risk=Risk.LOW,
        mode=Mode.READ,
        input_model=SearchKnowledgeArgs,
        output_model=SearchKnowledgeResult,
        execute=_search,
        scope=Scope.KNOWLEDGE_READ,
    ),
    ToolDefinition(
        name="coral.get_knowledge_node",
        version=1,
        description="One knowledge node with its edges (prerequisites and what builds on it).",
        risk=Risk.LOW,
        mode=Mode.READ,
        input_model=GetKnowledgeNodeArgs,
        output_model=GetKnowledgeNodeResult,
        execute=_get_node,
        scope=Scope.KNOWLEDGE_READ,
    ),
)
