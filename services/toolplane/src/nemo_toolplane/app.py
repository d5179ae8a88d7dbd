"""Assembles the tool plane: database pool, gRPC servicers, ACL and the HTTP edge."""

from __future__ import annotations

from nemo.toolplane.v1 import (
    toolplane_admin_service_pb2,
    toolplane_admin_service_pb2_grpc,
    toolplane_service_pb2,
    toolplane_service_pb2_grpc,
)
from nemo_core.db import create_pool
from nemo_core.server import Service, ServiceSetup
from nemo_toolplane.acl import ACL
from nemo_toolplane.edge import Edge, create_app
from nemo_toolplane.servicer import ToolPlaneAdminServicer, ToolPlaneServicer
from nemo_toolplane.settings import ToolPlaneSettings

SERVICE_NAME = "toolplane"


async def build(settings: ToolPlaneSettings) -> ServiceSetup:
    """Everything the tool plane serves, and how to clean it up."""
    pool = await create_pool(
        settings.database_url.get_secret_value(), max_size=settings.database_pool_size
    )
    edge = Edge(create_app(), settings.mcp_host, settings.mcp_port, settings.grace_period_seconds)
    return ServiceSetup(
        services=[
            Service.from_servicer(
                toolplane_service_pb2_grpc.add_ToolPlaneServiceServicer_to_server,
                ToolPlaneServicer(),
                toolplane_service_pb2.DESCRIPTOR.services_by_name["ToolPlaneService"],
            ),
            Service.from_servicer(
                toolplane_admin_service_pb2_grpc.add_ToolPlaneAdminServiceServicer_to_server,
                ToolPlaneAdminServicer(),
                toolplane_admin_service_pb2.DESCRIPTOR.services_by_name["ToolPlaneAdminService"],
            ),
        ],
        acl=ACL,
        background=[edge.run],
        cleanup=[pool.close],
    )
