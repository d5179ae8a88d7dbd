"""The console's road to the services: one channel to each, with the console's caller token, and
every call carrying the signed-in person's access token and a deadline.

A service's refusal becomes :class:`Refused` with the HTTP status a page shows it with; the
service's message is safe to show (the services' error convention) and its ``ErrorInfo`` reason
says which rule refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import grpc.aio

from nemo_console.settings import ConsoleSettings
from nemo_core.client import create_channel
from nemo_core.errors import error_details
from nemo_protos.context.v1 import context_service_pb2_grpc, rights_service_pb2_grpc
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2_grpc

Response = TypeVar("Response")

#: The HTTP status a page answers with, by the service's status.
HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.DATA_LOSS: 502,
}


@dataclass(frozen=True)
class Refused(Exception):
    """A service refused the call: the page's status, the reason and the service's words."""

    status: int
    reason: str
    message: str
    service: str


class Backends:
    """The channels and stubs; :meth:`call` makes one call for one person."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self._timeout = settings.call_timeout_seconds
        self._channels = {
            "toolplane": create_channel(settings.toolplane_address, settings),
            "context": create_channel(settings.context_address, settings),
            "gateway": create_channel(settings.gateway_address, settings),
        }
        self.people = toolplane_admin_service_pb2_grpc.ToolPlaneAdminServiceStub(
            self._channels["toolplane"]
        )
        self.context = context_service_pb2_grpc.ContextServiceStub(self._channels["context"])
        self.rights = rights_service_pb2_grpc.RightsServiceStub(self._channels["context"])
        self.gateway = gateway_service_pb2_grpc.GatewayServiceStub(self._channels["gateway"])

    async def call(
        self,
        service: str,
        method: Callable[..., Awaitable[Response]],
        request: Any,
        access_token: str | None,
    ) -> Response:
        """``method(request)`` for the person ``access_token`` proves; :class:`Refused` when the
        service refuses or cannot answer."""
        metadata = (("authorization", f"Bearer {access_token}"),) if access_token else ()
        try:
            return await method(request, metadata=metadata, timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            details = error_details(error)
            raise Refused(
                HTTP_STATUS.get(details.code, 502),
                details.reason or details.code.name,
                details.message or "the service did not answer",
                service,
            ) from None

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
