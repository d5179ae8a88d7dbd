"""Assembles the context service: database pool, servicer, ACL."""

from __future__ import annotations

from nemo.context.v1 import context_service_pb2, context_service_pb2_grpc
from nemo_context.acl import ACL
from nemo_context.servicer import ContextServicer
from nemo_context.settings import ContextSettings
from nemo_core.db import create_pool
from nemo_core.server import Service, ServiceSetup

SERVICE_NAME = "context"


async def build(settings: ContextSettings) -> ServiceSetup:
    """Everything the context server serves, and how to clean it up."""
    pool = await create_pool(
        settings.database_url.get_secret_value(), max_size=settings.database_pool_size
    )
    servicer = ContextServicer()
    return ServiceSetup(
        services=[
            Service.from_servicer(
                context_service_pb2_grpc.add_ContextServiceServicer_to_server,
                servicer,
                context_service_pb2.DESCRIPTOR.services_by_name["ContextService"],
            )
        ],
        acl=ACL,
        cleanup=[pool.close],
    )
