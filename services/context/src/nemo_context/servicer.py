"""gRPC handlers of the context service; each stays thin and delegates to one module."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc.aio

from nemo.context.v1 import context_service_pb2 as pb
from nemo.context.v1 import context_service_pb2_grpc as pb_grpc
from nemo_core.errors import not_implemented

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class ContextServicer(pb_grpc.ContextServiceServicer):
    """The ContextService RPCs; an RPC not built yet answers UNIMPLEMENTED."""

    async def BuildContext(
        self, request: pb.BuildContextRequest, context: Context
    ) -> pb.BuildContextResponse:
        raise not_implemented("BuildContext")

    async def BuildConversationContext(
        self, request: pb.BuildConversationContextRequest, context: Context
    ) -> pb.BuildConversationContextResponse:
        raise not_implemented("BuildConversationContext")

    async def RecordTurn(
        self, request: pb.RecordTurnRequest, context: Context
    ) -> pb.RecordTurnResponse:
        raise not_implemented("RecordTurn")

    async def CheckLearnerAccess(
        self, request: pb.CheckLearnerAccessRequest, context: Context
    ) -> pb.CheckLearnerAccessResponse:
        raise not_implemented("CheckLearnerAccess")

    async def SearchKnowledge(
        self, request: pb.SearchKnowledgeRequest, context: Context
    ) -> pb.SearchKnowledgeResponse:
        raise not_implemented("SearchKnowledge")

    async def GetKnowledgeNode(
        self, request: pb.GetKnowledgeNodeRequest, context: Context
    ) -> pb.GetKnowledgeNodeResponse:
        raise not_implemented("GetKnowledgeNode")

    async def GetSnapshot(
        self, request: pb.GetSnapshotRequest, context: Context
    ) -> pb.GetSnapshotResponse:
        raise not_implemented("GetSnapshot")

    async def ListPurposes(
        self, request: pb.ListPurposesRequest, context: Context
    ) -> pb.ListPurposesResponse:
        raise not_implemented("ListPurposes")
