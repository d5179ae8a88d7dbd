"""gRPC handlers of the tool plane; each stays thin and delegates to one module."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc.aio

from nemo.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo.toolplane.v1 import toolplane_admin_service_pb2_grpc as admin_pb_grpc
from nemo.toolplane.v1 import toolplane_service_pb2 as pb
from nemo.toolplane.v1 import toolplane_service_pb2_grpc as pb_grpc
from nemo_core.errors import not_implemented

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class ToolPlaneServicer(pb_grpc.ToolPlaneServiceServicer):
    """The ToolPlaneService RPCs; an RPC not built yet answers UNIMPLEMENTED."""

    async def ListTools(
        self, request: pb.ListToolsRequest, context: Context
    ) -> pb.ListToolsResponse:
        raise not_implemented("ListTools")

    async def CallTool(self, request: pb.CallToolRequest, context: Context) -> pb.CallToolResponse:
        raise not_implemented("CallTool")


class ToolPlaneAdminServicer(admin_pb_grpc.ToolPlaneAdminServiceServicer):
    """The ToolPlaneAdminService RPCs; an RPC not built yet answers UNIMPLEMENTED."""

    async def IssueAgentToken(
        self, request: admin_pb.IssueAgentTokenRequest, context: Context
    ) -> admin_pb.IssueAgentTokenResponse:
        raise not_implemented("IssueAgentToken")

    async def RevokeAgentToken(
        self, request: admin_pb.RevokeAgentTokenRequest, context: Context
    ) -> admin_pb.RevokeAgentTokenResponse:
        raise not_implemented("RevokeAgentToken")

    async def ListApprovals(
        self, request: admin_pb.ListApprovalsRequest, context: Context
    ) -> admin_pb.ListApprovalsResponse:
        raise not_implemented("ListApprovals")

    async def DecideApproval(
        self, request: admin_pb.DecideApprovalRequest, context: Context
    ) -> admin_pb.DecideApprovalResponse:
        raise not_implemented("DecideApproval")

    async def ListAuditEntries(
        self, request: admin_pb.ListAuditEntriesRequest, context: Context
    ) -> admin_pb.ListAuditEntriesResponse:
        raise not_implemented("ListAuditEntries")
