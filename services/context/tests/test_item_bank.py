"""StoreGeneratedItems through a real server: the gateway alone stores generated items with their
keys and rubrics; every malformed item, unknown node or conflicting id refuses the whole call
with nothing written; storing the same items again changes nothing."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest

from nemo_core.db import connect
from nemo_core.errors import error_details
from nemo_protos.context.v1 import item_bank_pb2 as pb

from .conftest import RunningContextServer

TIMEOUT = 10.0
NODE = "math-08-algebraic-identities"
BY = "coral.generate_items@2"


def _item(**changes: object) -> pb.GeneratedItem:
    item = pb.GeneratedItem(
        item_id=f"gi_test_{secrets.token_hex(6)}", node_id=NODE, kind="multiple_choice",
        stem="(x + 1)² bằng?", choices=["x² + 1", "x² + 2x + 1"], answer_key="x² + 2x + 1",
        rubric="Nhận ra hạng tử 2x.",
    )  # fmt: skip
    for name, value in changes.items():
        if name == "answer_key" and value is None:
            item.ClearField("answer_key")
        elif isinstance(value, list):
            del getattr(item, name)[:]
            getattr(item, name).extend(value)
        else:
            setattr(item, name, value)
    return item


@pytest.fixture
async def bank(owner_dsn: str) -> AsyncIterator[list[str]]:
    """Item ids the test stored, deleted afterwards."""
    ids: list[str] = []
    yield ids
    conn = await connect(owner_dsn)
    try:
        await conn.execute("DELETE FROM knowledge.items WHERE id LIKE 'gi_test_%'")
    finally:
        await conn.close()


async def _stored(owner_dsn: str) -> list[tuple[object, ...]]:
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT id, answer_key, rubric, origin, generated_by, difficulty FROM knowledge.items"
            " WHERE id LIKE 'gi_test_%' ORDER BY id"
        )
    finally:
        await conn.close()
    return [tuple(row.values()) for row in rows]


async def test_items_are_stored_with_key_and_rubric_and_again_is_a_no_op(
    context_server: RunningContextServer, owner_dsn: str, bank: list[str]
) -> None:
    items = [_item(), _item(kind="short_answer", choices=[], answer_key=None)]
    request = pb.StoreGeneratedItemsRequest(items=items, generated_by=BY)
    stub = context_server.stub("gateway")
    first = await stub.StoreGeneratedItems(request, timeout=TIMEOUT)
    again = await stub.StoreGeneratedItems(request, timeout=TIMEOUT)
    assert (first.stored_item_count, first.existing_item_count) == (2, 0)
    assert (again.stored_item_count, again.existing_item_count) == (0, 2)
    expected = sorted(
        (item.item_id, item.answer_key if item.HasField("answer_key") else None, item.rubric,
         "generated", BY, None)
        for item in items
    )  # fmt: skip
    assert await _stored(owner_dsn) == expected


@pytest.mark.parametrize(
    "bad",
    [
        {"item_id": ""},
        {"item_id": "gi test"},
        {"kind": "essay"},
        {"stem": "  "},
        {"rubric": ""},
        {"stem": "nul\x00"},
        {"answer_key": "x² + 3"},
        {"answer_key": None},
        {"choices": ["a", "a"], "answer_key": "a"},
        {"kind": "short_answer"},
        {"choices": [f"c{i}" for i in range(9)], "answer_key": "c0"},
    ],
)
async def test_a_malformed_item_refuses_the_whole_call(
    bad: dict[str, object], context_server: RunningContextServer, owner_dsn: str, bank: list[str]
) -> None:
    request = pb.StoreGeneratedItemsRequest(items=[_item(), _item(**bad)], generated_by=BY)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await context_server.stub("gateway").StoreGeneratedItems(request, timeout=TIMEOUT)
    details = error_details(raised.value)
    assert (details.code, details.reason, details.metadata["index"]) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_GENERATED_ITEM",
        "1",
    )
    assert await _stored(owner_dsn) == []


async def test_an_unknown_node_or_a_conflicting_id_writes_nothing(
    context_server: RunningContextServer, owner_dsn: str, bank: list[str]
) -> None:
    stub = context_server.stub("gateway")
    unknown = pb.StoreGeneratedItemsRequest(
        items=[_item(), _item(node_id="math-99-none")], generated_by=BY
    )
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.StoreGeneratedItems(unknown, timeout=TIMEOUT)
    assert error_details(raised.value).reason == "KNOWLEDGE_NODE_NOT_FOUND"
    kept = _item()
    await stub.StoreGeneratedItems(
        pb.StoreGeneratedItemsRequest(items=[kept], generated_by=BY), timeout=TIMEOUT
    )
    conflicting = pb.StoreGeneratedItemsRequest(
        items=[_item(), _item(item_id=kept.item_id, rubric="Khác.")], generated_by=BY
    )
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.StoreGeneratedItems(conflicting, timeout=TIMEOUT)
    details = error_details(raised.value)
    assert (details.code, details.reason) == (grpc.StatusCode.ALREADY_EXISTS, "ITEM_ID_CONFLICT")
    assert [row[0] for row in await _stored(owner_dsn)] == [kept.item_id]


@pytest.mark.parametrize("generated_by", ["", "coral.generate_items", "x@" + "1" * 30])
async def test_the_generating_prompt_must_be_named(
    generated_by: str, context_server: RunningContextServer, bank: list[str]
) -> None:
    request = pb.StoreGeneratedItemsRequest(items=[_item()], generated_by=generated_by)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await context_server.stub("gateway").StoreGeneratedItems(request, timeout=TIMEOUT)
    assert error_details(raised.value).reason == "INVALID_GENERATED_ITEM"


async def test_only_the_gateway_stores_items(context_server: RunningContextServer) -> None:
    request = pb.StoreGeneratedItemsRequest(items=[_item()], generated_by=BY)
    for caller in ("toolplane", "audit"):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await context_server.stub(caller).StoreGeneratedItems(request, timeout=TIMEOUT)
        assert error_details(raised.value).reason == "CALLER_NOT_ALLOWED"


@pytest.mark.parametrize(
    "personal",
    [
        {"stem": "Gọi cô giáo theo số 0912 345 678 rồi trả lời: (x + 1)² bằng?"},
        {"rubric": "Gửi bài cho thầy qua \uff54\uff48\uff41\uff59.toan\uff20example.com."},
        {"stem": "Ngày sinh: 14/10/2012. (x + 1)² bằng?"},
        {"rubric": '{"studentName": "Minh"}'},
        {
            "choices": ["47 Lê Văn Sỹ, phường 13, quận 3", "x² + 2x + 1"],
            "answer_key": "x² + 2x + 1",
        },
    ],
)
async def test_an_item_with_personal_data_is_refused_whole(
    personal: dict[str, object],
    context_server: RunningContextServer,
    owner_dsn: str,
    bank: list[str],
) -> None:
    # The item bank is shared by every learner: no one's contact data, birth date or personal
    # field may enter it, whoever it belongs to.
    request = pb.StoreGeneratedItemsRequest(items=[_item(), _item(**personal)], generated_by=BY)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await context_server.stub("gateway").StoreGeneratedItems(request, timeout=TIMEOUT)
    details = error_details(raised.value)
    assert (details.code, details.reason, details.metadata["index"]) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "IDENTIFIER_IN_ITEM",
        "1",
    )
    assert await _stored(owner_dsn) == []
