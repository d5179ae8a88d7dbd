"""The exact result cache: keyed by everything a result depends on, including the caller's
permission scope, so two scopes never read each other's entry."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from datetime import UTC
from pathlib import Path

import grpc
import grpc.aio
import pytest

from nemo_context.snapshots.keys import MasterKey
from nemo_core.callers import CallerAcl
from nemo_core.client import create_channel
from nemo_core.db import connect
from nemo_core.errors import error_details
from nemo_core.limits import InFlightLimit
from nemo_core.server import Server
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_gateway.app import SERVICE_NAME, build
from nemo_gateway.cache import CachedRun, CacheKey, ResultCache
from nemo_gateway.context_client import ContextClient
from nemo_gateway.errors import provider_busy
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.learner.tutor_hint import TutorHintVariables
from nemo_gateway.prompts.registry import REGISTRY
from nemo_gateway.providers.factory import build_provider
from nemo_gateway.runner import Clock, Prepared, PromptRunner
from nemo_gateway.settings import GatewaySettings
from nemo_protos.gateway.v1 import answer_pb2
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc as pb_grpc
from nemo_testing.providers import Answer, ScriptedProvider

from .gateway_testing import (
    CONTEXT_CLIENT_TOKEN,
    FIXED_TIME,
    LLM_KEY,
    StartGateway,
    start_context_service,
    variables,
)

TOKENS = {"internal": "internal-token-for-cache-0123", "reports": "reports-token-for-cache-0123"}
PASSAGE = answer_pb2.Passage(
    document_id="doc-1", title="Hằng đẳng thức", text="(a + b)² = a² + 2ab + b².", score=1.0
)


def _answer(text: str) -> Answer:
    return Answer(json.dumps({"covered": True, "answer": text}, ensure_ascii=False))


@pytest.fixture
async def two_callers(provider: ScriptedProvider) -> AsyncIterator[pb_grpc.GatewayServiceAsyncStub]:
    """A gateway whose ACL admits two caller identities (two permission scopes)."""
    settings = GatewaySettings(
        listen_address="127.0.0.1:0",
        caller_tokens=TOKENS,
        client_token=CONTEXT_CLIENT_TOKEN,
        context_address="127.0.0.1:9",
        provider="openai",
        llm_base_url=provider.openai_base_url,
        llm_api_key=LLM_KEY,
        log_level="WARNING",
    )
    setup = await build(settings)
    acl = CallerAcl({identity: {"Answer", "RunPrompt"} for identity in TOKENS})
    server = Server(SERVICE_NAME, settings, dataclasses.replace(setup, acl=acl))
    port = await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield pb_grpc.GatewayServiceStub(channel)
    await server.shutdown()


async def _ask(stub: pb_grpc.GatewayServiceAsyncStub, caller: str) -> pb.AnswerResponse:
    response: pb.AnswerResponse = await stub.Answer(
        pb.AnswerRequest(question="(a + b)² là gì?", passages=[PASSAGE], evaluate_time=FIXED_TIME),
        metadata=((DEFAULT_CALLER_TOKEN_METADATA_KEY, TOKENS[caller]),),
        timeout=10,
    )
    return response


async def test_two_callers_never_receive_each_others_entry(
    two_callers: pb_grpc.GatewayServiceAsyncStub, provider: ScriptedProvider
) -> None:
    provider.script(_answer("Đáp án cho internal [1]."), _answer("Đáp án cho reports [1]."))
    first = await _ask(two_callers, "internal")
    again = await _ask(two_callers, "internal")
    other = await _ask(two_callers, "reports")
    assert (first.run.cache_hit, again.run.cache_hit, other.run.cache_hit) == (False, True, False)
    assert first.answer.answer == again.answer.answer == "Đáp án cho internal [1]."
    assert other.answer.answer == "Đáp án cho reports [1]."
    # The hit made no request and names the request that produced the entry.
    assert len(provider.requests) == 2
    assert (again.run.attempts, again.run.request_sha256) == (0, first.run.request_sha256)
    assert (await _ask(two_callers, "reports")).answer.answer == "Đáp án cho reports [1]."


async def test_each_learner_gets_their_own_entry_and_snapshot(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script(
        Answer(json.dumps({"hint": "Gợi ý thứ nhất."}, ensure_ascii=False)),
        Answer(json.dumps({"hint": "Gợi ý thứ hai."}, ensure_ascii=False)),
    )

    async def hint(learner_id: str) -> pb.RunPromptResponse:
        response: pb.RunPromptResponse = await gateway.stub.RunPrompt(
            pb.RunPromptRequest(
                prompt_id="learner.tutor_hint",
                learner_id=learner_id,
                variables=variables(node_id="math-08-algebraic-identities"),
            ),
            metadata=gateway.metadata,
            timeout=10,
        )
        return response

    l1, l3, l1_again = await hint("L-2041-1"), await hint("L-2041-3"), await hint("L-2041-1")
    assert [r.output.tutor_hint.hint for r in (l1, l3, l1_again)] == [
        "Gợi ý thứ nhất.",
        "Gợi ý thứ hai.",
        "Gợi ý thứ nhất.",
    ]
    assert [r.run.cache_hit for r in (l1, l3, l1_again)] == [False, False, True]
    # A hit still names the snapshot of the context it was served for.
    assert l1_again.run.input_ref
    assert l1_again.run.input_ref != l1.run.input_ref


async def test_two_learners_never_share_an_entry_even_for_identical_prompt_text(
    provider: ScriptedProvider, context_address: str
) -> None:
    settings = GatewaySettings(
        client_token=CONTEXT_CLIENT_TOKEN,
        context_address=context_address,
        provider="openai",
        llm_base_url=provider.openai_base_url,
        llm_api_key=LLM_KEY,
    )
    model = build_provider(settings)
    assert model is not None
    channel = create_channel(context_address, settings)
    runner = PromptRunner(
        settings,
        model,
        ContextClient(channel),
        ResultCache(max_entries=16, ttl_seconds=60),
        InFlightLimit(4, provider_busy),
    )
    spec = REGISTRY.get("learner.tutor_hint")
    assert spec is not None
    clock = Clock(FIXED_TIME.ToDatetime(tzinfo=UTC), from_server=False)

    async def prepare(learner_id: str) -> Prepared:
        return await runner.prepare(
            spec, TutorHintVariables(), lang=Lang.VI, clock=clock, learner_id=learner_id,
            caller="internal",
        )  # fmt: skip

    try:
        l1, l3 = await prepare("L-2041-1"), await prepare("L-2041-3")
        # L-2041-3's scope with L-2041-1's context: the prompt text is the same, only the scope
        # differs.
        l3_same_text = dataclasses.replace(l3, prompt=l1.prompt)
        assert spec.render(l3_same_text.prompt) == spec.render(l1.prompt)
        assert l3_same_text.scope != l1.scope
        provider.script(
            Answer(json.dumps({"hint": "Gợi ý thứ nhất."}, ensure_ascii=False)),
            Answer(json.dumps({"hint": "Gợi ý thứ hai."}, ensure_ascii=False)),
        )
        results = [await runner.execute(p, clock) for p in (l1, l3_same_text, l1, l3_same_text)]
    finally:
        await channel.close()
        await model.aclose()
    assert [r.output.hint for r in results] == [
        "Gợi ý thứ nhất.",
        "Gợi ý thứ hai.",
        "Gợi ý thứ nhất.",
        "Gợi ý thứ hai.",
    ]
    assert [r.record.cache_hit for r in results] == [False, False, True, True]
    assert len(provider.requests) == 2


async def test_fallbacks_are_not_cached(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    provider.script(Answer("not json", truncated=True), _answer("Có [1]."))
    request = pb.AnswerRequest(question="Q?", passages=[PASSAGE])
    first = await gateway.stub.Answer(request, metadata=gateway.metadata, timeout=10)
    second = await gateway.stub.Answer(request, metadata=gateway.metadata, timeout=10)
    assert (first.run.reason, second.run.cache_hit, second.answer.answer) == (
        "TRUNCATED",
        False,
        "Có [1].",
    )


def _key(**changes: str) -> CacheKey:
    base = CacheKey("p@1", "model", "params", "schema", "context", "input", "caller:internal")
    return dataclasses.replace(base, **changes)


def test_every_key_part_separates_entries() -> None:
    cache = ResultCache(max_entries=16, ttl_seconds=60)
    cache.put(_key(), CachedRun("output", "MODEL", "", "sha", "m"))
    for part in (f.name for f in dataclasses.fields(CacheKey)):
        assert cache.get(_key(**{part: "other"})) is None, part
    assert cache.get(_key()) is not None


async def test_entries_are_bounded_in_number_and_age() -> None:
    cache = ResultCache(max_entries=2, ttl_seconds=0.2)
    for scope in ("a", "b", "c"):
        cache.put(_key(scope=scope), CachedRun(scope, "MODEL", "", "", ""))
    assert len(cache) == 2
    await asyncio.sleep(0.3)
    assert cache.get(_key(scope="c")) is None


def test_a_zero_size_turns_the_cache_off() -> None:
    cache = ResultCache(max_entries=0, ttl_seconds=60)
    cache.put(_key(), CachedRun("output", "MODEL", "", "", ""))
    assert cache.get(_key()) is None


async def test_an_erased_learners_cached_result_is_never_served(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_dsn: str,
    owner_dsn: str,
    tmp_path: Path,
) -> None:
    """The cache needs no invalidation: every lookup follows a fresh build, which the context
    service refuses for an erased learner, so the entry it holds is never served again."""
    master_key = "cache-erasure-master-key-0123456789abcdef012"
    async with start_context_service(
        context_dsn, tmp_path, snapshot_master_key=master_key
    ) as context:
        gateway = await start_gateway(context_address=context)
        provider.script(Answer(json.dumps({"hint": "Gợi ý đã lưu."}, ensure_ascii=False)))
        request = pb.RunPromptRequest(
            prompt_id="learner.tutor_hint",
            learner_id="L-2041-10",
            variables=variables(node_id="math-08-algebraic-identities"),
        )
        first = await gateway.stub.RunPrompt(request, metadata=gateway.metadata, timeout=10)
        again = await gateway.stub.RunPrompt(request, metadata=gateway.metadata, timeout=10)
        assert (first.run.cache_hit, again.run.cache_hit) == (False, True)
        owner = await connect(owner_dsn)
        subject = MasterKey(master_key.encode()).subject("L-2041-10")
        await owner.execute(
            "INSERT INTO rights.blocks (subject, kind, request_id)"
            " VALUES ($1, 'erased', 'CACHE-1')",
            subject,
        )
        try:
            refused = None
            for _attempt in range(40):  # the context service reads blocks within seconds
                try:
                    served = await gateway.stub.RunPrompt(
                        request, metadata=gateway.metadata, timeout=10
                    )
                except grpc.aio.AioRpcError as error:
                    refused = error_details(error)
                    break
                assert served.run.cache_hit  # until the block applies, still the same entry
                await asyncio.sleep(0.25)
        finally:
            await owner.execute("DELETE FROM rights.blocks WHERE request_id = 'CACHE-1'")
            await owner.close()
        assert refused is not None
        assert (refused.code, refused.reason) == (grpc.StatusCode.NOT_FOUND, "CONTEXT_REJECTED")
        assert refused.metadata["context_reason"] == "LEARNER_ERASED"
        assert len(provider.requests) == 1
