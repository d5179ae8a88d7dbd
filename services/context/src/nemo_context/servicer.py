"""gRPC handlers of the context service; each stays thin and delegates to one module."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc.aio

from nemo_context import knowledge, people
from nemo_context.access import check_learner_access, check_user
from nemo_context.acl import PERSON_CALLERS
from nemo_context.builder import ContextBuilder, build_context
from nemo_context.conversation.builder import ConversationBuilder, build_conversation_context
from nemo_context.conversation.record import record_turn
from nemo_context.conversation.store import session_learner
from nemo_context.item_bank import store_generated_items
from nemo_context.pseudonym import Pseudonymizer
from nemo_context.purposes import purpose_table
from nemo_context.rights.blocks import ProcessingBlocks
from nemo_context.settings import ContextSettings
from nemo_context.snapshots.reads import read_snapshot
from nemo_context.snapshots.store import SnapshotStore
from nemo_core.callers import current_caller
from nemo_core.db import Pool
from nemo_core.people import PersonVerifier
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1 import context_service_pb2_grpc as pb_grpc
from nemo_protos.context.v1 import item_bank_pb2

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class ContextServicer(pb_grpc.ContextServiceServicer):
    """The ContextService RPCs; each handler delegates to the module that owns its rule."""

    def __init__(
        self,
        *,
        settings: ContextSettings,
        pool: Pool,
        snapshots: SnapshotStore,
        builder: ContextBuilder,
        conversations: ConversationBuilder,
        blocks: ProcessingBlocks,
        pseudonymizer: Pseudonymizer,
        people: PersonVerifier | None = None,
    ) -> None:
        self._settings = settings
        self._pool = pool
        self._snapshots = snapshots
        self._builder = builder
        self._conversations = conversations
        self._blocks = blocks
        self._pseudonymizer = pseudonymizer
        self._people = people

    async def BuildContext(
        self, request: pb.BuildContextRequest, context: Context
    ) -> pb.BuildContextResponse:
        await self._blocks.check(request.learner_id)
        bundle = await build_context(
            self._builder, self._snapshots, request, caller=current_caller()
        )
        return pb.BuildContextResponse(bundle=bundle.message)

    async def BuildConversationContext(
        self, request: pb.BuildConversationContextRequest, context: Context
    ) -> pb.BuildConversationContextResponse:
        learner_id = await session_learner(self._pool, request.session_id)
        if learner_id is not None:
            await self._blocks.check(learner_id)
        bundle = await build_conversation_context(
            self._conversations, self._snapshots, request, learner_id or ""
        )
        return pb.BuildConversationContextResponse(bundle=bundle.message)

    async def RecordTurn(
        self, request: pb.RecordTurnRequest, context: Context
    ) -> pb.RecordTurnResponse:
        # A turn is only looked up when some learner is blocked, which is rarely the case.
        if await self._blocks.any():
            learner_id = await session_learner(self._pool, request.session_id)
            if learner_id is not None:
                await self._blocks.check(learner_id)
        return await record_turn(self._pool, request, self._settings.identifier_key_bytes())

    async def CheckLearnerAccess(
        self, request: pb.CheckLearnerAccessRequest, context: Context
    ) -> pb.CheckLearnerAccessResponse:
        return await check_learner_access(self._pool, request)

    async def CheckUser(
        self, request: pb.CheckUserRequest, context: Context
    ) -> pb.CheckUserResponse:
        return await check_user(self._pool, request)

    async def SearchKnowledge(
        self, request: pb.SearchKnowledgeRequest, context: Context
    ) -> pb.SearchKnowledgeResponse:
        search = knowledge.validate_search(request)
        async with self._pool.acquire() as conn:
            hits = await knowledge.search(
                conn,
                search.query_words,
                limit=search.limit,
                subject=search.subject,
                grade=search.grade,
            )
        return pb.SearchKnowledgeResponse(hits=hits)

    async def GetKnowledgeNode(
        self, request: pb.GetKnowledgeNodeRequest, context: Context
    ) -> pb.GetKnowledgeNodeResponse:
        async with self._pool.acquire() as conn:
            return await knowledge.get_node(conn, request.node_id)

    async def GetSnapshot(
        self, request: pb.GetSnapshotRequest, context: Context
    ) -> pb.GetSnapshotResponse:
        if current_caller() in PERSON_CALLERS:
            user_id = await people.person_of(context, self._people)
            await people.may_read_snapshot(
                self._pool, self._pseudonymizer, user_id, request.input_ref
            )
        snapshot = await read_snapshot(self._snapshots, request.input_ref, self._blocks.erased_ref)
        return snapshot.message

    async def ListLinkedLearners(
        self, request: pb.ListLinkedLearnersRequest, context: Context
    ) -> pb.ListLinkedLearnersResponse:
        linked = await people.linked_learners(self._pool, self._pseudonymizer, request.user_id)
        return pb.ListLinkedLearnersResponse(
            learners=[
                pb.LinkedLearner(
                    learner_ref=learner.learner_ref, grade=learner.grade, relation=learner.relation
                )
                for learner in linked
            ]
        )

    async def ResolveLearnerRef(
        self, request: pb.ResolveLearnerRefRequest, context: Context
    ) -> pb.ResolveLearnerRefResponse:
        learner_id, relation = await people.resolve(
            self._pool, self._pseudonymizer, request.learner_ref, request.user_id
        )
        return pb.ResolveLearnerRefResponse(learner_id=learner_id, relation=relation)

    async def ListPurposes(
        self, request: pb.ListPurposesRequest, context: Context
    ) -> pb.ListPurposesResponse:
        return purpose_table()

    async def StoreGeneratedItems(
        self, request: item_bank_pb2.StoreGeneratedItemsRequest, context: Context
    ) -> item_bank_pb2.StoreGeneratedItemsResponse:
        return await store_generated_items(self._pool, request)
