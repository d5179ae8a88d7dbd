"""Content-only prompts: provably unable to receive learner data; generated items keep their
answer key and rubric on the server."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_core.db import connect
from nemo_core.errors import error_details
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.coral.generate_items import (
    DraftItem,
    DraftItems,
    GenerateItemsVariables,
    guardrail,
)
from nemo_gateway.prompts.registry import REGISTRY
from nemo_gateway.prompts.spec import PromptInput
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import outputs_pb2, run_pb2
from nemo_testing.corpora.markup import markup
from nemo_testing.providers import Answer, ScriptedProvider
from services.gateway.tests.gateway_testing import StartGateway, variables

# The only inputs a content prompt may take: curriculum content and item text.
CONTENT_FIELDS = frozenset(
    {"topic", "subject", "grade", "node_id", "kind", "count", "stem", "choices", "answer_key"}
)
NODE = "math-08-algebraic-identities"
ITEMS_REQUEST = {
    "topic": "Hằng đẳng thức", "subject": "math", "grade": 8, "count": 2, "node_id": NODE,
}  # fmt: skip
DRAFT = {
    "items": [
        {
            "kind": "multiple_choice",
            "stem": "(x + 1)² bằng?",
            "choices": ["x² + 1", "x² + 2x + 1", "x² + x + 1", "2x + 1"],
            "answer": "x² + 2x + 1",
            "rubric": "RUBRIC-SECRET-1: nhận ra hạng tử 2x.",
        },
        {
            "kind": "multiple_choice",
            "stem": "(x - 2)² bằng?",
            "choices": ["x² - 4", "x² + 4", "x² - 4x + 4", "x² - 2x + 4"],
            "answer": "x² - 4x + 4",
            "rubric": "RUBRIC-SECRET-2: dấu của hạng tử giữa.",
        },
    ]
}


def test_content_prompts_have_no_purpose_and_accept_only_content_fields() -> None:
    content = [spec for spec in REGISTRY if spec.prompt_id.startswith("coral.")]
    assert [spec.prompt_id for spec in content] == ["coral.evaluate_item", "coral.generate_items"]
    for spec in content:
        assert spec.purpose is None
        assert spec.variables.model_config.get("extra") == "forbid"
        assert set(spec.variables.model_fields) <= CONTENT_FIELDS, spec.prompt_id


@pytest.mark.parametrize("prompt_id", ["coral.generate_items", "coral.evaluate_item"])
async def test_a_content_prompt_refuses_a_learner(
    prompt_id: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await gateway.stub.RunPrompt(
            pb.RunPromptRequest(prompt_id=prompt_id, learner_id="L-2041-1"),
            metadata=gateway.metadata,
            timeout=5,
        )
    assert error_details(refused.value).reason == "LEARNER_DATA_REFUSED"
    assert provider.requests == []


async def test_learner_data_smuggled_in_variables_is_refused(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    for extra in (
        {"learner_id": "L-2041-1"},
        {"mastery": 0.4},
        {"learner_ref": "nemo_0123456789ab"},
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await gateway.stub.RunPrompt(
                pb.RunPromptRequest(
                    prompt_id="coral.generate_items", variables=variables(**ITEMS_REQUEST, **extra)
                ),
                metadata=gateway.metadata,
                timeout=5,
            )
        assert error_details(refused.value).reason == "INVALID_VARIABLES"
    assert provider.requests == []


async def test_generated_items_reach_the_client_without_answer_key_or_rubric(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script(Answer(json.dumps(DRAFT, ensure_ascii=False)))
    response = await gateway.stub.RunPrompt(
        pb.RunPromptRequest(prompt_id="coral.generate_items", variables=variables(**ITEMS_REQUEST)),
        metadata=gateway.metadata,
        timeout=5,
    )
    assert response.run.path == run_pb2.RUN_PATH_MODEL
    items = response.output.generated_items.items
    assert [(item.position, item.stem) for item in items] == [
        (1, "(x + 1)² bằng?"),
        (2, "(x - 2)² bằng?"),
    ]
    assert all(item.item_id.startswith("gi_") for item in items)
    wire = response.SerializeToString()
    for secret in ("RUBRIC-SECRET-1", "RUBRIC-SECRET-2"):
        assert secret.encode() not in wire
    # The client message has no field that could carry them.
    assert {"answer", "answer_key", "rubric"}.isdisjoint(
        outputs_pb2.GeneratedItem.DESCRIPTOR.fields_by_name
    )
    # The prompt itself carried no learner data: no pseudonym, no learner id.
    sent = provider.requests[0].body.decode()
    assert "nemo_" not in sent
    assert "L-2041-1" not in sent


async def test_a_model_cannot_set_server_authoritative_item_fields(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str
) -> None:
    gateway = await start_gateway(context_address=context_address)
    with_positions = {"items": [{**item, "position": 9} for item in DRAFT["items"]]}
    provider.script(Answer(json.dumps(with_positions)), Answer(json.dumps(DRAFT)))
    response = await gateway.stub.RunPrompt(
        pb.RunPromptRequest(prompt_id="coral.generate_items", variables=variables(**ITEMS_REQUEST)),
        metadata=gateway.metadata,
        timeout=5,
    )
    assert (response.run.path, response.run.reason) == (run_pb2.RUN_PATH_REPAIRED, "REASKED")
    assert [item.position for item in response.output.generated_items.items] == [1, 2]


async def test_a_key_outside_the_choices_is_rejected_by_the_guardrail(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str
) -> None:
    gateway = await start_gateway(context_address=context_address)
    broken = json.loads(json.dumps(DRAFT))
    broken["items"][0]["answer"] = "x² + 2"
    provider.script(Answer(json.dumps(broken)))
    response = await gateway.stub.RunPrompt(
        pb.RunPromptRequest(prompt_id="coral.generate_items", variables=variables(**ITEMS_REQUEST)),
        metadata=gateway.metadata,
        timeout=5,
    )
    assert (response.run.path, response.run.reason) == (
        run_pb2.RUN_PATH_FALLBACK,
        "GUARDRAIL_REJECTED",
    )
    assert len(provider.requests) == 1


# Every text of an item, and what a hostile model might put in it.
ITEM_TEXTS = ("stem", "choice", "answer", "rubric")
NOT_PLAIN = (
    "Bấm [lời giải](https://giaibai.example) nhé",
    "Mã nemo_3fa2c4d5e6f7a8b9 của em",
    "Chữ \u202eđảo ngược",
    "Tài khoản U-2041-P1",
    "Xem giaibaitap.com",
)


def _with(text: str, where: str) -> dict[str, Any]:
    """DRAFT with ``text`` in one text of its first item (an answer stays one of the choices)."""
    draft: dict[str, Any] = json.loads(json.dumps(DRAFT))
    item = draft["items"][0]
    if where == "choice":
        item["choices"][0] = text
    elif where == "answer":
        item["choices"][1] = item["answer"] = text
    else:
        item[where] = text
    return draft


# The smallest bound on an item's texts: longer markup is refused by validation, not the guardrail.
TEXT_LIMIT = DraftItem.model_json_schema()["properties"]["answer"]["maxLength"]


def _fitting_markup(rng: random.Random) -> str:
    """A sentence holding generated markup, short enough for every text of an item."""
    while len(text := f"Xem {markup(rng).text}") > TEXT_LIMIT:
        pass
    return text


@given(st.randoms(use_true_random=False), st.sampled_from(ITEM_TEXTS))
def test_the_guardrail_refuses_markup_in_every_text_of_an_item(
    rng: random.Random, where: str
) -> None:
    prompt = PromptInput(
        GenerateItemsVariables(**ITEMS_REQUEST), Lang.VI, datetime(2026, 1, 1, tzinfo=UTC)
    )
    problem = guardrail(DraftItems.model_validate(_with(_fitting_markup(rng), where)), prompt)
    # An answer is one of the choices, which are checked first.
    assert problem is not None
    assert problem.startswith(f"item 1's {'choice' if where == 'answer' else where}"), problem


async def test_items_that_are_not_plain_text_are_neither_returned_nor_stored(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str, owner_dsn: str
) -> None:
    gateway = await start_gateway(context_address=context_address, cache_max_entries=0)
    request = pb.RunPromptRequest(
        prompt_id="coral.generate_items", variables=variables(**ITEMS_REQUEST)
    )
    for text in NOT_PLAIN:
        for where in ITEM_TEXTS:
            provider.script(Answer(json.dumps(_with(text, where), ensure_ascii=False)))
            response = await gateway.stub.RunPrompt(request, metadata=gateway.metadata, timeout=5)
            assert (response.run.path, response.run.reason) == (
                run_pb2.RUN_PATH_FALLBACK,
                "GUARDRAIL_REJECTED",
            ), (text, where)
            ids = [item.item_id for item in response.output.generated_items.items]
            stored = await _bank(owner_dsn, ids)
            assert len(stored) == len(ids)
            assert text not in json.dumps([*stored.values()], ensure_ascii=False), (text, where)
            assert text not in str(response), (text, where)
    conn = await connect(owner_dsn)
    try:
        hostile = await conn.fetchval(
            "SELECT count(*) FROM knowledge.items WHERE stem || rubric || coalesce(answer_key, '')"
            " || array_to_string(choices, ' ') LIKE ANY($1::text[])",
            [f"%{text}%" for text in NOT_PLAIN],
        )
    finally:
        await conn.close()
    assert hostile == 0


async def _bank(owner_dsn: str, item_ids: list[str]) -> dict[str, tuple[object, ...]]:
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT id, node_id, kind, stem, choices, answer_key, rubric, origin, generated_by,"
            " difficulty FROM knowledge.items WHERE id = ANY($1::text[])",
            item_ids,
        )
    finally:
        await conn.close()
    return {row["id"]: tuple(row.values())[1:] for row in rows}


async def test_generated_items_are_kept_in_the_item_bank_with_key_and_rubric(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str, owner_dsn: str
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script(Answer(json.dumps(DRAFT, ensure_ascii=False)))
    request = pb.RunPromptRequest(
        prompt_id="coral.generate_items", variables=variables(**ITEMS_REQUEST)
    )
    response = await gateway.stub.RunPrompt(request, metadata=gateway.metadata, timeout=5)
    ids = [item.item_id for item in response.output.generated_items.items]
    bank = await _bank(owner_dsn, ids)
    assert [bank[item_id] for item_id in ids] == [
        (NODE, d["kind"], d["stem"], d["choices"], d["answer"], d["rubric"], "generated",
         "coral.generate_items@3", None)
        for d in DRAFT["items"]
    ]  # fmt: skip
    # The same request again is answered from the cache, and the bank is unchanged.
    again = await gateway.stub.RunPrompt(request, metadata=gateway.metadata, timeout=5)
    assert (again.run.cache_hit, [i.item_id for i in again.output.generated_items.items]) == (
        True,
        ids,
    )


async def test_the_baseline_items_are_kept_too_marked_by_their_rubric(
    start_gateway: StartGateway, context_address: str, owner_dsn: str
) -> None:
    gateway = await start_gateway(context_address=context_address, ai_enrichment_enabled=False)
    request = pb.RunPromptRequest(
        prompt_id="coral.generate_items", variables=variables(**ITEMS_REQUEST)
    )
    response = await gateway.stub.RunPrompt(request, metadata=gateway.metadata, timeout=5)
    ids = [item.item_id for item in response.output.generated_items.items]
    bank = await _bank(owner_dsn, ids)
    assert len(bank) == 2
    assert all(row[4] is None and row[5] for row in bank.values())


async def test_items_for_an_unknown_node_are_refused_and_never_returned(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script(Answer(json.dumps(DRAFT, ensure_ascii=False)))
    unknown = variables(**{**ITEMS_REQUEST, "node_id": "math-99-no-such-node"})
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await gateway.stub.RunPrompt(
            pb.RunPromptRequest(prompt_id="coral.generate_items", variables=unknown),
            metadata=gateway.metadata,
            timeout=5,
        )
    assert refused.value.code() is grpc.StatusCode.NOT_FOUND
    details = error_details(refused.value)
    assert (details.reason, details.metadata["context_reason"]) == (
        "CONTEXT_REJECTED",
        "KNOWLEDGE_NODE_NOT_FOUND",
    )


async def test_another_node_with_the_same_prompt_text_gets_its_own_items(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script(*[Answer(json.dumps(DRAFT, ensure_ascii=False))] * 2)
    ids = []
    for node in (NODE, "math-08-factorization"):
        request = pb.RunPromptRequest(
            prompt_id="coral.generate_items",
            variables=variables(**{**ITEMS_REQUEST, "node_id": node}),
        )
        response = await gateway.stub.RunPrompt(request, metadata=gateway.metadata, timeout=5)
        assert not response.run.cache_hit
        ids.append([item.item_id for item in response.output.generated_items.items])
    assert len(provider.requests) == 2
    assert set(ids[0]).isdisjoint(ids[1])
