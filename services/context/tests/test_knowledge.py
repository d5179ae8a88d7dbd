"""Knowledge search (diacritics, aliases, filters, limits) and node lookup with edges."""

from __future__ import annotations

import grpc
import pytest

from nemo_context import knowledge
from nemo_core.db import Pool
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import context_service_pb2 as pb


async def search(
    pool: Pool, query: str, *, limit: int = 0, subject: str = "", grade: int = 0
) -> list[tuple[str, float]]:
    request = knowledge.validate_search(
        pb.SearchKnowledgeRequest(query=query, limit=limit, subject=subject, grade=grade)
    )
    async with pool.acquire() as conn:
        hits = await knowledge.search(
            conn,
            request.query_words,
            limit=request.limit,
            subject=request.subject,
            grade=request.grade,
        )
    return [(hit.node.node_id, hit.score) for hit in hits]


def test_single_letters_do_not_match() -> None:
    # "ạ" and "x" would otherwise match the alias "area of a triangle".
    assert knowledge.query_words("Vậy (x + 3)² bằng bao nhiêu ạ?") == (
        "vay",
        "3",
        "bang",
        "bao",
        "nhieu",
    )


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("he so goc", "math-08-slope"),
        ("Hệ số góc", "math-08-slope"),
        ("HE SO GOC", "math-08-slope"),
        ("hằng đẳng thức", "math-08-algebraic-identities"),
        ("quadratic equations", "math-09-quadratic-equations"),
        ("Quadratic Formula", "math-09-quadratic-equations"),
        ("dinh li thales", "math-08-thales-theorem"),
        ("Phuong trinh bac hai", "math-09-quadratic-equations"),
        # A chat message that names a node ranks it first despite its other words.
        ("Em chưa hiểu hằng đẳng thức (a + b)² ạ.", "math-08-algebraic-identities"),
    ],
)
async def test_best_hit(context_pool: Pool, query: str, best: str) -> None:
    hits = await search(context_pool, query)
    assert hits, query
    assert hits[0][0] == best
    # Strictly best: a tie would make the order an accident of the database.
    assert len(hits) == 1 or hits[0][1] > hits[1][1]


async def test_hits_are_ordered_by_score_and_partial_matches_rank_lower(context_pool: Pool) -> None:
    hits = await search(context_pool, "quadratic equations")
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    ids = [node_id for node_id, _ in hits]
    # "linear equations" shares one word of two: found, below the full match.
    assert "math-08-linear-equations" in ids
    assert ids.index("math-09-quadratic-equations") < ids.index("math-08-linear-equations")


async def test_words_match_whole_words_only(context_pool: Pool) -> None:
    ids = [node_id for node_id, _ in await search(context_pool, "tam giac")]
    assert ids[0] == "math-08-similar-triangles"
    assert "math-05-triangle-area" in ids  # "Diện tích hình tam giác"
    assert await search(context_pool, "quadr") == []


async def test_filters_by_subject_and_grade(context_pool: Pool) -> None:
    every_grade = {node_id for node_id, _ in await search(context_pool, "phuong trinh", limit=50)}
    assert {"math-08-linear-equations", "math-09-quadratic-equations"} <= every_grade
    grade_9 = {node_id for node_id, _ in await search(context_pool, "phuong trinh", grade=9)}
    assert grade_9 == {"math-09-quadratic-equations", "math-09-linear-systems"}
    assert await search(context_pool, "phuong trinh", subject="science") == []
    science = await search(context_pool, "khoi luong rieng", subject="science", grade=8)
    assert [node_id for node_id, _ in science] == ["science-08-density"]


async def test_limit_caps_the_hits(context_pool: Pool) -> None:
    many = await search(context_pool, "so phan", limit=50)
    assert len(many) > 2
    assert await search(context_pool, "so phan", limit=2) == many[:2]
    assert len(await search(context_pool, "so phan")) == min(len(many), knowledge.DEFAULT_LIMIT)


@pytest.mark.parametrize(
    ("request_fields", "reason"),
    [
        ({"query": ""}, "INVALID_QUERY"),
        ({"query": " ,.;!? "}, "INVALID_QUERY"),
        ({"query": "a ạ x"}, "INVALID_QUERY"),
        ({"query": "x" * 501}, "INVALID_QUERY"),
        ({"query": "he so goc", "limit": 51}, "INVALID_LIMIT"),
        ({"query": "he so goc", "limit": -1}, "INVALID_LIMIT"),
        ({"query": "he so goc", "grade": 13}, "INVALID_GRADE"),
        ({"query": "he so goc", "grade": -2}, "INVALID_GRADE"),
        ({"query": "he so goc", "subject": "math\x00"}, "INVALID_SUBJECT"),
        ({"query": "he so goc", "subject": "m" * 65}, "INVALID_SUBJECT"),
    ],
)
def test_invalid_searches(request_fields: dict[str, object], reason: str) -> None:
    with pytest.raises(ServiceError) as caught:
        knowledge.validate_search(pb.SearchKnowledgeRequest(**request_fields))  # type: ignore[arg-type]
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.reason == reason


async def test_node_with_edges_in_both_directions(context_pool: Pool) -> None:
    async with context_pool.acquire() as conn:
        response = await knowledge.get_node(conn, "math-08-slope")
    assert response.node.title == "Hệ số góc"
    assert list(response.node.aliases) == ["slope", "gradient"]
    assert (response.node.subject, response.node.grade, response.node.strand) == (
        "math",
        8,
        "functions",
    )
    assert response.node.description.startswith("Hệ số góc của đường thẳng")
    edges = [(e.from_node_id, e.to_node_id, e.kind) for e in response.edges]
    assert edges == [
        ("math-08-linear-functions", "math-08-slope", "prerequisite"),
        ("math-08-slope", "math-09-linear-systems", "related"),
    ]


async def test_unknown_and_empty_node_ids(context_pool: Pool) -> None:
    async with context_pool.acquire() as conn:
        with pytest.raises(ServiceError) as missing:
            await knowledge.get_node(conn, "math-99-nothing")
        with pytest.raises(ServiceError) as empty:
            await knowledge.get_node(conn, "")
    assert (missing.value.code, missing.value.reason) == (
        grpc.StatusCode.NOT_FOUND,
        "KNOWLEDGE_NODE_NOT_FOUND",
    )
    assert (empty.value.code, empty.value.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_NODE_ID",
    )


@pytest.mark.parametrize("node_id", ["math-08\x00", "math\n08", "m" * 129])
async def test_node_ids_that_cannot_be_keys_are_invalid_arguments(
    context_pool: Pool, node_id: str
) -> None:
    async with context_pool.acquire() as conn:
        with pytest.raises(ServiceError) as caught:
            await knowledge.get_node(conn, node_id)
    assert (caught.value.code, caught.value.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_NODE_ID",
    )
