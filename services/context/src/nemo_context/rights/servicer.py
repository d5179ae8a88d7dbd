"""gRPC handlers of RightsService; each delegates to :mod:`nemo_context.rights.service`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeAlias

import grpc.aio

from nemo_context.rights import service
from nemo_context.snapshots.keys import MasterKey
from nemo_core.callers import current_caller
from nemo_core.db import Pool
from nemo_protos.context.v1 import rights_service_pb2 as pb
from nemo_protos.context.v1 import rights_service_pb2_grpc as pb_grpc

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class RightsServicer(pb_grpc.RightsServiceServicer):
    """The RightsService RPCs."""

    def __init__(
        self,
        pool: Pool,
        master: MasterKey,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._pool = pool
        self._master = master
        self._clock = clock

    async def ListRetention(
        self, request: pb.ListRetentionRequest, context: Context
    ) -> pb.ListRetentionResponse:
        return service.retention_table()

    async def SubmitRightsRequest(
        self, request: pb.SubmitRightsRequestRequest, context: Context
    ) -> pb.SubmitRightsRequestResponse:
        recorded = await service.submit(
            self._pool, self._master, request, caller=current_caller(), now=self._clock()
        )
        return pb.SubmitRightsRequestResponse(request=recorded)

    async def GetRightsRequest(
        self, request: pb.GetRightsRequestRequest, context: Context
    ) -> pb.GetRightsRequestResponse:
        return pb.GetRightsRequestResponse(request=await service.get(self._pool, request))
