"""StoreGeneratedItems: generated practice items, with their answer keys and rubrics, join the
knowledge item bank, so answers to them can be graded while clients only ever see item ids.

Only the gateway may call it (caller ACL). The items of one call are stored in one transaction:
every item is checked first, and an unknown node, an invalid item or an id already stored with
other content refuses the whole call with nothing written. Storing the same items again is a
no-op: the gateway derives an item's id from its content, so the same content has the same id.
Answer keys and rubrics never leave this service: no RPC returns them. The bank is shared by
every learner, so an item whose text the identifier gate would refuse (a field naming a person
written into it, anyone's e-mail, phone number, street address or birth date) is refused with
``IDENTIFIER_IN_ITEM``.
"""

from __future__ import annotations

import re
from typing import Final

import grpc

from nemo_context.errors import service_error
from nemo_context.gate import find_leak
from nemo_core.db import Pool
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import item_bank_pb2 as pb
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

MAX_ITEMS: Final = 20
MAX_CHOICES: Final = 8
MAX_TEXT_CHARS: Final = 4000
KINDS: Final = frozenset({"multiple_choice", "short_answer"})
_ID: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_PROMPT_REF: Final = re.compile(r"[a-z0-9_.]{1,100}@[A-Za-z0-9_.-]{1,20}")

_EXISTING_SQL: Final = """
    SELECT id, node_id, kind, stem, choices, answer_key, rubric
    FROM knowledge.items WHERE id = ANY($1::text[])
"""
_INSERT_SQL: Final = """
    INSERT INTO knowledge.items
        (id, node_id, kind, stem, choices, answer_key, rubric, origin, generated_by)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'generated', $8)
    ON CONFLICT (id) DO NOTHING
"""


def _invalid(index: int, problem: str) -> ServiceError:
    return service_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.INVALID_GENERATED_ITEM,
        f"item {index}: {problem}",
        {"index": str(index)},
    )


def _text(value: str) -> bool:
    # PostgreSQL text cannot hold NUL.
    return bool(value.strip()) and len(value) <= MAX_TEXT_CHARS and "\x00" not in value


def _check(index: int, item: pb.GeneratedItem) -> None:
    if not _ID.fullmatch(item.item_id) or not _ID.fullmatch(item.node_id):
        raise _invalid(index, "item_id and node_id must be 1 to 128 of A-Z a-z 0-9 _ . : -")
    if item.kind not in KINDS:
        raise _invalid(index, f"kind must be one of {sorted(KINDS)}")
    if not _text(item.stem) or not _text(item.rubric):
        raise _invalid(index, f"stem and rubric must hold text, at most {MAX_TEXT_CHARS} chars")
    if len(item.choices) > MAX_CHOICES or not all(_text(c) for c in item.choices):
        raise _invalid(index, f"at most {MAX_CHOICES} choices, each holding text")
    if item.kind == "multiple_choice":
        if len(set(item.choices)) != len(item.choices) or len(item.choices) < 2:
            raise _invalid(index, "a multiple-choice item needs distinct choices")
        if not item.HasField("answer_key") or item.answer_key not in item.choices:
            raise _invalid(index, "a multiple-choice item's answer key is one of its choices")
    elif item.choices:
        raise _invalid(index, "a short-answer item has no choices")
    if item.HasField("answer_key") and not _text(item.answer_key):
        raise _invalid(index, "an answer key, when given, must hold text")


def _row(item: pb.GeneratedItem) -> tuple[object, ...]:
    key = item.answer_key if item.HasField("answer_key") else None
    return (item.item_id, item.node_id, item.kind, item.stem, list(item.choices), key, item.rubric)


def validate(request: pb.StoreGeneratedItemsRequest) -> None:
    """INVALID_ARGUMENT / INVALID_GENERATED_ITEM for anything off, before any write."""
    if not 1 <= len(request.items) <= MAX_ITEMS:
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.INVALID_GENERATED_ITEM,
            f"a call stores 1 to {MAX_ITEMS} items",
        )
    if not _PROMPT_REF.fullmatch(request.generated_by):
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.INVALID_GENERATED_ITEM,
            'generated_by must name the prompt as "id@version"',
        )
    ids: set[str] = set()
    for index, item in enumerate(request.items):
        _check(index, item)
        if find_leak(item, forbidden_values=()) is not None:
            raise service_error(
                grpc.StatusCode.INVALID_ARGUMENT,
                ErrorReason.IDENTIFIER_IN_ITEM,
                f"item {index}: its text must not carry personal data or a personal field",
                {"index": str(index)},
            )
        if item.item_id in ids:
            raise _invalid(index, "the same item_id twice in one call")
        ids.add(item.item_id)


async def store_generated_items(
    pool: Pool, request: pb.StoreGeneratedItemsRequest
) -> pb.StoreGeneratedItemsResponse:
    """Store the request's items; all or none (see the module docstring)."""
    validate(request)
    rows = {item.item_id: _row(item) for item in request.items}
    async with pool.acquire() as conn, conn.transaction():
        nodes = {item.node_id for item in request.items}
        known = await conn.fetch(
            "SELECT id FROM knowledge.nodes WHERE id = ANY($1::text[])", list(nodes)
        )
        missing = sorted(nodes - {row["id"] for row in known})
        if missing:
            raise service_error(
                grpc.StatusCode.NOT_FOUND,
                ErrorReason.KNOWLEDGE_NODE_NOT_FOUND,
                "no knowledge node has this id",
                {"node_id": missing[0]},
            )
        existing = await conn.fetch(_EXISTING_SQL, list(rows))
        for row in existing:
            stored = (row["id"], row["node_id"], row["kind"], row["stem"], list(row["choices"]),
                      row["answer_key"], row["rubric"])  # fmt: skip
            if stored != rows[row["id"]]:
                raise service_error(
                    grpc.StatusCode.ALREADY_EXISTS,
                    ErrorReason.ITEM_ID_CONFLICT,
                    "an item with this id is stored with other content",
                    {"item_id": row["id"]},
                )
        await conn.executemany(_INSERT_SQL, [(*row, request.generated_by) for row in rows.values()])
    return pb.StoreGeneratedItemsResponse(
        stored_item_count=len(rows) - len(existing), existing_item_count=len(existing)
    )
