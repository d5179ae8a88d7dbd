"""gRPC handlers of the gateway; each stays thin and delegates to one module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc.aio

from nemo.gateway.v1 import gateway_service_pb2 as pb
from nemo.gateway.v1 import gateway_service_pb2_grpc as pb_grpc
from nemo_core.errors import not_implemented

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class GatewayServicer(pb_grpc.GatewayServiceServicer):
    """The GatewayService RPCs; an RPC not built yet answers UNIMPLEMENTED."""

    async def RunPrompt(
        self, request: pb.RunPromptRequest, context: Context
    ) -> pb.RunPromptResponse:
        raise not_implemented("RunPrompt")

    async def StreamPrompt(
        self, request: pb.StreamPromptRequest, context: Context
    ) -> AsyncIterator[pb.StreamPromptResponse]:
        raise not_implemented("StreamPrompt")
        yield  # an async generator, as streaming handlers must be

    async def Answer(self, request: pb.AnswerRequest, context: Context) -> pb.AnswerResponse:
        raise not_implemented("Answer")

    async def ListPrompts(
        self, request: pb.ListPromptsRequest, context: Context
    ) -> pb.ListPromptsResponse:
        raise not_implemented("ListPrompts")
