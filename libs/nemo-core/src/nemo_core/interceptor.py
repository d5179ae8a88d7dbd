"""The server interceptor: caller identity, ACL, required deadlines, the concurrency limit and
the error model.

All five jobs share one wrapper around each handler, built once per method, because every extra
interceptor layer costs a coroutine and a context proxy on each call.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import grpc
import grpc.aio
from google.protobuf.message import DecodeError

from nemo_core.callers import CallerIdentifier, not_allowed, set_current_caller, unauthenticated
from nemo_core.deadlines import deadline_required, set_time_remaining
from nemo_core.errors import ServiceError, shared_error, to_service_error
from nemo_core.limits import InFlightLimit
from nemo_protos.type.v1.error_reason_pb2 import ErrorReason

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    # Generic only in the type stubs.
    _Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]
    _Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
    _UnaryBehavior: TypeAlias = Callable[[Any, _Context], Awaitable[Any]]
    _StreamBehavior: TypeAlias = Callable[[Any, _Context], AsyncIterator[Any]]


class _MalformedRequest:
    """Stands in for a request body that does not parse (invalid UTF-8 in a string, nesting too
    deep, garbage), so the wrapper answers INVALID_ARGUMENT after authentication instead of
    grpc's bare UNKNOWN naming a Python exception."""


_MALFORMED = _MalformedRequest()


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError:
            return _MALFORMED

    return parse


def malformed_request() -> ServiceError:
    return shared_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.MALFORMED_REQUEST,
        "the request is not a valid protobuf message of this method's type",
    )


def server_busy() -> ServiceError:
    return shared_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        ErrorReason.SERVER_BUSY,
        "the server is handling as many calls as it may at once; retry later",
    )


@dataclass(frozen=True)
class MethodPolicy:
    """What the interceptor enforces on one method."""

    callers: frozenset[str]
    deadline_required: bool


class ServerInterceptor(grpc.aio.ServerInterceptor):
    """Enforce :class:`MethodPolicy` on the methods it knows; pass every other method through.

    Methods without a policy are the health and reflection services, which stay open and are
    not counted against ``max_concurrent_rpcs`` (so a saturated server still answers its probes),
    and names nothing serves, which grpc answers with UNIMPLEMENTED.
    """

    def __init__(
        self,
        *,
        domain: str,
        identifier: CallerIdentifier,
        policies: Mapping[str, MethodPolicy],
        max_concurrent_rpcs: int,
    ) -> None:
        self._domain = domain
        self._identifier = identifier
        self._policies = dict(policies)
        self._slots = InFlightLimit(max_concurrent_rpcs, server_busy)
        self._wrapped: dict[str, tuple[_Handler, _Handler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[_Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> _Handler | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        policy = self._policies.get(method)
        if handler is None or policy is None:
            return handler
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(handler, method, policy)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _wrap(self, handler: _Handler, method: str, policy: MethodPolicy) -> _Handler:
        kwargs: dict[str, Any] = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        # Only single requests: a request stream's items reach the handler, not the wrapper.
        single = kwargs | {"request_deserializer": _tolerant(handler.request_deserializer)}
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(cast(Any, handler.unary_unary), method, policy), **single
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._unary(cast(Any, handler.stream_unary), method, policy), **kwargs
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(cast(Any, handler.unary_stream), method, policy), **single
            )
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._stream(cast(Any, handler.stream_stream), method, policy), **kwargs
            )
        raise ValueError(f"handler of {method} has no behavior")

    def _unary(self, behavior: _UnaryBehavior, method: str, policy: MethodPolicy) -> _UnaryBehavior:
        async def wrapper(request: Any, context: _Context) -> Any:
            try:
                self._admit(context, method, policy)
                if request is _MALFORMED:
                    raise malformed_request()
                with self._slots.hold():
                    return await behavior(request, context)
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                await self._abort(context, method, exc)

        return wrapper

    def _stream(
        self, behavior: _StreamBehavior, method: str, policy: MethodPolicy
    ) -> _StreamBehavior:
        # Streaming handlers must be async generators (the OpenTelemetry wrapper iterates them).
        async def wrapper(request: Any, context: _Context) -> AsyncIterator[Any]:
            try:
                self._admit(context, method, policy)
                if request is _MALFORMED:
                    raise malformed_request()
                with self._slots.hold():
                    async for response in behavior(request, context):
                        yield response
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                await self._abort(context, method, exc)

        return wrapper

    def _admit(self, context: _Context, method: str, policy: MethodPolicy) -> None:
        identity = self._identifier.identify(context)
        if identity is None:
            raise unauthenticated()
        if identity not in policy.callers:
            raise not_allowed(identity, method)
        remaining = context.time_remaining()
        if remaining is None and policy.deadline_required:
            raise deadline_required()
        # grpc runs each RPC in its own task, so these bindings end with the RPC.
        set_current_caller(identity)
        set_time_remaining(remaining)

    async def _abort(self, context: _Context, method: str, exc: Exception) -> None:
        error = to_service_error(exc, method=method)
        if isinstance(exc, ServiceError):
            logger.info(
                "%s failed: %s",
                method,
                error.reason,
                extra={"grpc_code": error.code.name, "reason": error.reason},
            )
        status = error.to_status(self._domain)
        await context.abort(status.code, status.details, status.trailing_metadata)
