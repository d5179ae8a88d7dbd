"""Knowledge search and node lookup over the curriculum graph (no learner data, no binding).

Matching ignores Vietnamese diacritics and case on both sides: text is folded
(``nemo_core.text.fold``) and split into words. The query is folded here; node titles and aliases
are folded by the database into ``knowledge.nodes.search_text`` (the Vietnamese part of the same
rule in SQL), which prefilters candidates by whole words. Candidates are then ranked by

- query coverage: the share of the query's words the title (or one alias) contains;
- field coverage: the share of the title's (or alias's) words the query contains, so a long chat
  message that names a node ranks that node high;
- a phrase bonus when the whole title or alias appears in the query, or the whole query in it.

Each part is at most 1, so a score is in [0, 3]; title and aliases compete and the best counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import asyncpg
import grpc

from nemo_context.errors import service_error
from nemo_core.db import Connection
from nemo_core.errors import ServiceError
from nemo_core.text import is_significant, words
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1 import knowledge_pb2
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

DEFAULT_LIMIT: Final = 10
MAX_LIMIT: Final = 50
MAX_QUERY_CHARS: Final = 500
MAX_SUBJECT_CHARS: Final = 64
MAX_NODE_ID_CHARS: Final = 128
#: Words of a query that take part in matching; a chat message may be longer.
MAX_QUERY_WORDS: Final = 48

_NODE_COLUMNS = "id, title, aliases, subject, grade, strand, description"


def query_words(text: str) -> tuple[str, ...]:
    """The words of ``text`` that take part in matching: distinct, in order, at most
    :data:`MAX_QUERY_WORDS`, single letters left out (``nemo_core.text.is_significant``)."""
    distinct = dict.fromkeys(word for word in words(text) if is_significant(word))
    return tuple(distinct)[:MAX_QUERY_WORDS]


@dataclass(frozen=True)
class SearchRequest:
    """A validated knowledge search."""

    query_words: tuple[str, ...]
    limit: int
    subject: str
    grade: int


def validate_search(request: pb.SearchKnowledgeRequest) -> SearchRequest:
    """Check a SearchKnowledge request; INVALID_ARGUMENT with a reason for anything off."""
    if len(request.query) > MAX_QUERY_CHARS:
        raise _invalid(
            ErrorReason.INVALID_QUERY, f"query is longer than {MAX_QUERY_CHARS} characters"
        )
    matched_words = query_words(request.query)
    if not matched_words:
        raise _invalid(
            ErrorReason.INVALID_QUERY, "query must contain a word of two letters or a number"
        )
    if not 0 <= request.limit <= MAX_LIMIT:
        raise _invalid(
            ErrorReason.INVALID_LIMIT, f"limit must be between 1 and {MAX_LIMIT} (0 means 10)"
        )
    if not (request.grade == 0 or 1 <= request.grade <= 12):
        raise _invalid(ErrorReason.INVALID_GRADE, "grade must be between 1 and 12 (0 means any)")
    if not _is_short_printable(request.subject, MAX_SUBJECT_CHARS):
        raise _invalid(
            ErrorReason.INVALID_SUBJECT,
            f"subject must be at most {MAX_SUBJECT_CHARS} printable characters",
        )
    return SearchRequest(
        query_words=matched_words,
        limit=request.limit or DEFAULT_LIMIT,
        subject=request.subject.strip(),
        grade=request.grade,
    )


def _is_short_printable(value: str, limit: int) -> bool:
    # NUL and other control characters would fail in PostgreSQL instead of here.
    return len(value) <= limit and value.isprintable()


def _invalid(reason: ErrorReason.ValueType, message: str) -> ServiceError:
    return service_error(grpc.StatusCode.INVALID_ARGUMENT, reason, message)


def _contains_run(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    """Whether ``needle`` occurs in ``haystack`` as consecutive words."""
    size = len(needle)
    return size > 0 and any(
        list(haystack[start : start + size]) == list(needle)
        for start in range(len(haystack) - size + 1)
    )


def _field_score(query: Sequence[str], field: Sequence[str]) -> float:
    if not field:
        return 0.0
    shared = set(query) & set(field)
    if not shared:
        return 0.0
    query_coverage = len(shared) / len(set(query))
    field_coverage = len(shared) / len(set(field))
    phrase = _contains_run(query, field) or _contains_run(field, query)
    return query_coverage + field_coverage + (1.0 if phrase else 0.0)


def score(query_words: Sequence[str], title: str, aliases: Sequence[str]) -> float:
    """Relevance of a node to the query words, in [0, 3]; see the module docstring."""
    return max(_field_score(query_words, words(field)) for field in (title, *aliases))


def node_message(row: asyncpg.Record) -> knowledge_pb2.KnowledgeNode:
    """A ``knowledge.nodes`` row as a message."""
    return knowledge_pb2.KnowledgeNode(
        node_id=row["id"],
        title=row["title"],
        aliases=row["aliases"],
        subject=row["subject"],
        grade=row["grade"],
        strand=row["strand"],
        description=row["description"],
    )


async def search(
    conn: Connection,
    query_words: Sequence[str],
    *,
    limit: int,
    subject: str = "",
    grade: int = 0,
    min_score: float = 0.0,
) -> list[knowledge_pb2.KnowledgeHit]:
    """Nodes matching ``query_words`` (folded words), best first, at most ``limit``."""
    if not query_words or limit <= 0:
        return []
    # Words are [a-z0-9]+ only, so they need no escaping inside the regular expression.
    pattern = r"\m(" + "|".join(query_words) + r")\M"
    rows = await conn.fetch(
        f"SELECT {_NODE_COLUMNS} FROM knowledge.nodes"
        " WHERE search_text ~ $1 AND ($2 = '' OR subject = $2) AND ($3 = 0 OR grade = $3)",
        pattern,
        subject,
        grade,
    )
    scored = [
        (score(query_words, row["title"], row["aliases"]), row["grade"], row["id"], row)
        for row in rows
    ]
    ranked = sorted(
        (entry for entry in scored if entry[0] > min_score),
        key=lambda entry: (-entry[0], entry[1], entry[2]),
    )
    return [
        knowledge_pb2.KnowledgeHit(node=node_message(row), score=round(value, 6))
        for value, _, _, row in ranked[:limit]
    ]


async def nodes_by_id(
    conn: Connection, node_ids: Sequence[str]
) -> list[knowledge_pb2.KnowledgeNode]:
    """The nodes among ``node_ids`` that exist, in the order given."""
    rows = await conn.fetch(
        f"SELECT {_NODE_COLUMNS} FROM knowledge.nodes WHERE id = ANY($1::text[])", list(node_ids)
    )
    by_id = {row["id"]: row for row in rows}
    return [node_message(by_id[node_id]) for node_id in node_ids if node_id in by_id]


async def get_node(conn: Connection, node_id: str) -> pb.GetKnowledgeNodeResponse:
    """One node with every edge into and out of it; NOT_FOUND for an unknown id."""
    if not node_id.strip() or not _is_short_printable(node_id, MAX_NODE_ID_CHARS):
        raise _invalid(
            ErrorReason.INVALID_NODE_ID,
            f"node_id is required: 1 to {MAX_NODE_ID_CHARS} printable characters",
        )
    found = await nodes_by_id(conn, [node_id])
    if not found:
        raise service_error(
            grpc.StatusCode.NOT_FOUND,
            ErrorReason.KNOWLEDGE_NODE_NOT_FOUND,
            "no knowledge node has this id",
        )
    edges = await conn.fetch(
        "SELECT from_node_id, to_node_id, kind FROM knowledge.edges"
        " WHERE from_node_id = $1 OR to_node_id = $1"
        " ORDER BY kind, from_node_id, to_node_id",
        node_id,
    )
    return pb.GetKnowledgeNodeResponse(
        node=found[0],
        edges=[
            knowledge_pb2.KnowledgeEdge(
                from_node_id=edge["from_node_id"], to_node_id=edge["to_node_id"], kind=edge["kind"]
            )
            for edge in edges
        ],
    )
