"""gRPC server bootstrap shared by the Nemo services.

A service describes itself with a :class:`ServiceSetup` (servicers, ACL, fan-out methods, cleanup
hooks, tasks to run alongside) and hands it to :func:`run_service` from its ``__main__``. The
:class:`Server` adds health and reflection, tracing, caller identity and ACL, required deadlines
and the error model, and shuts down gracefully on SIGTERM/SIGINT:

1. health turns NOT_SERVING for every service;
2. ``drain_seconds`` pass while new RPCs are still served (load balancers catch up);
3. the server refuses new RPCs and in-flight ones get ``grace_period_seconds`` to finish, while
   background tasks are asked to stop (and cancelled after the same grace);
4. cleanup hooks run, last registered first.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import grpc.aio
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import aio_server_interceptor

from nemo_core import event_loop
from nemo_core.callers import CallerAcl, CallerIdentifier
from nemo_core.interceptor import MethodPolicy, ServerInterceptor
from nemo_core.logs import configure_logging
from nemo_core.settings import ServiceSettings, load_settings
from nemo_core.telemetry import configure_telemetry

logger = logging.getLogger(__name__)

Cleanup = Callable[[], Awaitable[object]]
"""An async hook run once the server has stopped (close pools, flush queues)."""

Background = Callable[[asyncio.Event], Coroutine[Any, Any, None]]
"""An async task run alongside the server; it must return soon after the event is set."""

_Settings = TypeVar("_Settings", bound=ServiceSettings)


@dataclass(frozen=True)
class Service:
    """One gRPC service to serve: its full name, method names and how to register it."""

    full_name: str
    methods: tuple[str, ...]
    register: Callable[[grpc.aio.Server], None]

    @classmethod
    def from_servicer(
        cls,
        add_to_server: Callable[[Any, grpc.aio.Server], None],
        servicer: object,
        descriptor: ServiceDescriptor,
    ) -> Service:
        """From generated code: ``add_XServicer_to_server``, the servicer and
        ``x_pb2.DESCRIPTOR.services_by_name["X"]``."""
        return cls(
            full_name=descriptor.full_name,
            methods=tuple(method.name for method in descriptor.methods),
            register=lambda server: add_to_server(servicer, server),
        )

    @classmethod
    def from_handlers(
        cls, full_name: str, handlers: Mapping[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> Service:
        """From method handlers keyed by short method name (no generated code needed)."""
        generic = grpc.method_handlers_generic_handler(full_name, dict(handlers))
        return cls(
            full_name=full_name,
            methods=tuple(handlers),
            register=lambda server: server.add_generic_rpc_handlers((generic,)),
        )


@dataclass(frozen=True)
class ServiceSetup:
    """Everything a service contributes to its server."""

    services: Sequence[Service]
    acl: CallerAcl
    deadline_required: Collection[str] = ()
    """Methods that fan out, short or full names; calls to them must carry a deadline."""
    cleanup: Sequence[Cleanup] = ()
    background: Sequence[Background] = ()


def _is_traced(details: grpc.HandlerCallDetails) -> bool:
    # Health probes and reflection would flood the traces without telling anything.
    return not details.method.startswith("/grpc.")


def _method_policies(setup: ServiceSetup) -> dict[str, MethodPolicy]:
    """The policy of every served method; names in the ACL or fan-out list must exist."""
    full_names = {
        f"/{service.full_name}/{method}": method
        for service in setup.services
        for method in service.methods
    }
    known = set(full_names) | set(full_names.values())
    unknown = (set(setup.acl.names()) | set(setup.deadline_required)) - known
    if unknown:
        raise ValueError(f"ACL or deadline list names methods nobody serves: {sorted(unknown)}")
    return {
        full: MethodPolicy(
            callers=setup.acl.callers_of(full),
            deadline_required=full in setup.deadline_required or short in setup.deadline_required,
        )
        for full, short in full_names.items()
    }


def _server_options(settings: ServiceSettings) -> list[tuple[str, Any]]:
    keepalive_ms = int(settings.keepalive_time_seconds * 1000)
    return [
        ("grpc.max_receive_message_length", settings.max_receive_message_bytes),
        ("grpc.max_send_message_length", settings.max_send_message_bytes),
        ("grpc.keepalive_time_ms", keepalive_ms),
        ("grpc.keepalive_timeout_ms", int(settings.keepalive_timeout_seconds * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        # Clients ping at keepalive_time too; accepting twice as often absorbs their jitter
        # instead of answering with GOAWAY "too many pings".
        ("grpc.http2.min_ping_interval_without_data_ms", keepalive_ms // 2),
        # A second process on the same port must fail to start, not share the traffic.
        ("grpc.so_reuseport", 0),
        # A Service balances connections, not calls: a periodic GOAWAY makes clients reconnect,
        # so new replicas get their share. Calls in flight finish first: a recycled connection
        # is not a shutdown, and cutting them at the shutdown grace failed long model answers.
        ("grpc.max_connection_age_ms", int(settings.max_connection_age_seconds * 1000)),
        ("grpc.max_connection_age_grace_ms", int(settings.max_connection_age_grace_seconds * 1000)),
    ]


class Server:
    """One service's gRPC server and the tasks that live and stop with it."""

    def __init__(self, name: str, settings: ServiceSettings, setup: ServiceSetup) -> None:
        self.name = name
        self._settings = settings
        self._setup = setup
        self._health = health.aio.HealthServicer()
        self._server: grpc.aio.Server | None = None
        self._port = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._stop_requested = asyncio.Event()
        self._stopping = asyncio.Event()
        self._shutdown: asyncio.Task[None] | None = None
        self.failed = False
        """Whether a background task or cleanup hook failed (the process should exit non-zero)."""

    @property
    def port(self) -> int:
        """The bound port (useful with port 0); 0 before :meth:`start`."""
        return self._port

    async def start(self) -> int:
        """Bind, start serving, mark every service SERVING and start background tasks."""
        settings, setup = self._settings, self._setup
        if not settings.caller_tokens and settings.tls_files() is None:
            logger.warning("no caller tokens and no TLS: every RPC but health will be refused")
        interceptor = ServerInterceptor(
            domain=self.name,
            identifier=CallerIdentifier(
                tokens=settings.accepted_caller_tokens(),
                metadata_key=settings.caller_token_metadata_key,
                tls=settings.tls_files() is not None,
                known_identities=setup.acl.identities,
            ),
            policies=_method_policies(setup),
            # Not grpc's maximum_concurrent_rpcs: that one also refuses health checks, so every
            # saturated replica would fail its probes together.
            max_concurrent_rpcs=settings.max_concurrent_rpcs,
        )
        tracing = aio_server_interceptor(filter_=_is_traced)  # type: ignore[no-untyped-call]
        server = grpc.aio.server(
            interceptors=[tracing, interceptor], options=_server_options(settings)
        )
        service_names = [service.full_name for service in setup.services]
        for service in setup.services:
            service.register(server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection(
            [*service_names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
        )
        self._port = self._bind(server)
        self._server = server
        await server.start()
        for service_name in ["", *service_names]:
            await self._health.set(service_name, health_pb2.HealthCheckResponse.SERVING)
        for run in setup.background:
            task = asyncio.create_task(run(self._stopping))
            task.add_done_callback(self._on_background_done)
            self._tasks.append(task)
        logger.info(
            "serving",
            extra={
                "address": settings.listen_address,
                "port": self._port,
                "services": service_names,
                "tls": settings.tls_files() is not None,
            },
        )
        return self._port

    def _bind(self, server: grpc.aio.Server) -> int:
        address = self._settings.listen_address
        tls = self._settings.tls_files()
        if tls is None:
            return server.add_insecure_port(address)
        cert_file, key_file, ca_file = tls
        credentials = grpc.ssl_server_credentials(
            [(key_file.read_bytes(), cert_file.read_bytes())],
            root_certificates=ca_file.read_bytes(),
            require_client_auth=True,
        )
        return server.add_secure_port(address, credentials)

    def _on_background_done(self, task: asyncio.Task[None]) -> None:
        if self._stopping.is_set() or task.cancelled():
            return
        # A task that ends on its own takes part of the service with it: stop the rest too.
        self._tasks.remove(task)
        self.failed = True
        logger.error("background task ended before shutdown", exc_info=task.exception())
        self.request_stop()

    def request_stop(self) -> None:
        """Ask :func:`serve` to shut down (what SIGTERM and SIGINT do)."""
        self._stop_requested.set()

    async def wait_stop_requested(self) -> None:
        """Return once :meth:`request_stop` has been called."""
        await self._stop_requested.wait()

    async def shutdown(self) -> None:
        """Stop gracefully (see the module docstring); safe to call more than once."""
        if self._shutdown is None:
            self._shutdown = asyncio.ensure_future(self._shutdown_once())
        await asyncio.shield(self._shutdown)

    async def _shutdown_once(self) -> None:
        settings = self._settings
        logger.info("shutting down", extra={"drain_seconds": settings.drain_seconds})
        await self._health.enter_graceful_shutdown()
        if self._server is not None and settings.drain_seconds > 0:
            await asyncio.sleep(settings.drain_seconds)
        self._stopping.set()
        grace = settings.grace_period_seconds
        if self._server is not None:
            await asyncio.gather(self._server.stop(grace), self._stop_background(grace))
        for hook in reversed(self._setup.cleanup):
            try:
                await hook()
            except Exception:
                self.failed = True
                logger.exception("cleanup hook failed")
        logger.info("stopped")

    async def _stop_background(self, grace: float) -> None:
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks, timeout=grace)
        for task in pending:
            task.cancel()
        results = await asyncio.gather(*self._tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                self.failed = True
                logger.error("background task failed while stopping", exc_info=result)


async def serve(server: Server) -> None:
    """Run ``server`` until SIGTERM or SIGINT (or a failed background task), then shut down."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    # Installed before start, so a signal that arrives while starting still stops gracefully.
    for sig in signals:
        loop.add_signal_handler(sig, server.request_stop)
    try:
        await server.start()
        await server.wait_stop_requested()
    finally:
        await server.shutdown()
        for sig in signals:
            loop.remove_signal_handler(sig)


def run_service(
    name: str,
    settings_class: type[_Settings],
    build: Callable[[_Settings], Awaitable[ServiceSetup]],
) -> None:
    """Entry point of a service's ``__main__``: settings, logs, telemetry, build, serve; exits
    non-zero when the settings are invalid (see :func:`load_settings`) or when startup, a
    background task or a cleanup hook fails."""
    configure_logging(name)
    settings = load_settings(settings_class)
    configure_logging(name, settings.log_level)
    configure_telemetry(name)

    async def main() -> bool:
        server = Server(name, settings, await build(settings))
        await serve(server)
        return not server.failed

    try:
        ok = event_loop.run(main())
    except Exception:
        logger.exception("service failed")
        raise SystemExit(1) from None
    if not ok:
        raise SystemExit(1)
