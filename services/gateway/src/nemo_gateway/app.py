"""Assembles the gateway: servicer and ACL."""

from __future__ import annotations

from nemo.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc
from nemo_core.server import Service, ServiceSetup
from nemo_gateway.acl import ACL
from nemo_gateway.servicer import GatewayServicer
from nemo_gateway.settings import GatewaySettings

SERVICE_NAME = "gateway"


async def build(settings: GatewaySettings) -> ServiceSetup:
    """Everything the gateway serves."""
    servicer = GatewayServicer()
    return ServiceSetup(
        services=[
            Service.from_servicer(
                gateway_service_pb2_grpc.add_GatewayServiceServicer_to_server,
                servicer,
                gateway_service_pb2.DESCRIPTOR.services_by_name["GatewayService"],
            )
        ],
        acl=ACL,
    )
