"""gRPC handlers of RightsService; each delegates to :mod:`nemo_context.rights.service`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeAlias

import grpc.aio

from nemo_context.acl import PERSON_CALLERS
from nemo_context.people import check_learner_ref, linked_learners, not_linked, person_of
from nemo_context.pseudonym import Pseudonymizer
from nemo_context.rights import service
from nemo_context.snapshots.keys import MasterKey
from nemo_core.callers import current_caller
from nemo_core.db import Pool
from nemo_core.people import PersonVerifier, same_person
from nemo_protos.context.v1 import rights_service_pb2 as pb
from nemo_protos.context.v1 import rights_service_pb2_grpc as pb_grpc

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class RightsServicer(pb_grpc.RightsServiceServicer):
    """The RightsService RPCs."""

    def __init__(
        self,
        pool: Pool,
        master: MasterKey,
        pseudonymizer: Pseudonymizer,
        people: PersonVerifier | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._pool = pool
        self._master = master
        self._pseudonymizer = pseudonymizer
        self._people = people
        self._clock = clock

    async def _for_person(self, context: Context, learner_ref: str) -> tuple[str, str]:
        """The person the call acts for and the id of the learner linked to them in person
        that ``learner_ref`` names (the console's calls)."""
        user_id = await person_of(context, self._people)
        check_learner_ref(learner_ref)
        for learner in await linked_learners(self._pool, self._pseudonymizer, user_id):
            if learner.learner_ref == learner_ref:
                return user_id, learner.learner_id
        raise not_linked()

    async def ListRetention(
        self, request: pb.ListRetentionRequest, context: Context
    ) -> pb.ListRetentionResponse:
        return service.retention_table()

    async def SubmitRightsRequest(
        self, request: pb.SubmitRightsRequestRequest, context: Context
    ) -> pb.SubmitRightsRequestResponse:
        if current_caller() in PERSON_CALLERS:
            user_id, learner_id = await self._for_person(context, request.learner_ref)
            if request.requested_by and not same_person(request.requested_by, user_id):
                raise not_linked()
            request = pb.SubmitRightsRequestRequest(
                request_id=request.request_id,
                kind=request.kind,
                learner_id=learner_id,
                requested_by=user_id,
            )
        recorded = await service.submit(
            self._pool, self._master, request, caller=current_caller(), now=self._clock()
        )
        return pb.SubmitRightsRequestResponse(request=recorded)

    async def GetRightsRequest(
        self, request: pb.GetRightsRequestRequest, context: Context
    ) -> pb.GetRightsRequestResponse:
        return pb.GetRightsRequestResponse(request=await service.get(self._pool, request))

    async def ListRightsRequests(
        self, request: pb.ListRightsRequestsRequest, context: Context
    ) -> pb.ListRightsRequestsResponse:
        user_id, learner_id = await self._for_person(context, request.learner_ref)
        made = await service.made_by(self._pool, self._master.subject(learner_id), user_id)
        return pb.ListRightsRequestsResponse(requests=made)
