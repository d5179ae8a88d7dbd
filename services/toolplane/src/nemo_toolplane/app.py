"""Assembles the tool plane: database pool, router and its checks, gRPC servicers, the MCP edge."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from functools import partial

import httpx

from nemo_core.client import create_channel
from nemo_core.db import Pool, create_pool
from nemo_core.people import PersonVerifier
from nemo_core.server import Service, ServiceSetup
from nemo_protos.toolplane.v1 import (
    toolplane_admin_service_pb2,
    toolplane_admin_service_pb2_grpc,
    toolplane_service_pb2,
    toolplane_service_pb2_grpc,
)
from nemo_toolplane.acl import ACL
from nemo_toolplane.admin_servicer import ToolPlaneAdminServicer
from nemo_toolplane.agent_auth import AgentAuthenticator
from nemo_toolplane.approvals import ApprovalStore, CallApprovals
from nemo_toolplane.audit.log import AuditLog
from nemo_toolplane.context_client import ContextClient
from nemo_toolplane.docs.library import DocsLibrary
from nemo_toolplane.limits.auth_failures import FailedAuthentications
from nemo_toolplane.limits.calls import CallLimiter
from nemo_toolplane.limits.shared import SharedBuckets
from nemo_toolplane.mcp.edge import Edge, create_app
from nemo_toolplane.mcp.endpoint import McpEndpoint
from nemo_toolplane.mcp.origins import OriginPolicy
from nemo_toolplane.oauth.verifier import OAuthVerifier
from nemo_toolplane.people import PeopleAuthenticator
from nemo_toolplane.router import ToolRouter
from nemo_toolplane.rules.cache import RulesCache
from nemo_toolplane.rules.store import RulesStore
from nemo_toolplane.servicer import ToolPlaneServicer
from nemo_toolplane.settings import ToolPlaneSettings
from nemo_toolplane.tool_call import Services
from nemo_toolplane.tools import build_registry

logger = logging.getLogger(__name__)

SERVICE_NAME = "toolplane"
# CallTool may call the context service: without a deadline, a stuck dependency would hold the
# call (and, under an approval, its database transaction) for as long as the caller waits.
DEADLINE_REQUIRED = ("CallTool",)


@dataclass(frozen=True)
class ToolPlane:
    """The assembled service: what the server runs, and the parts tests look at."""

    setup: ServiceSetup
    router: ToolRouter
    audit: AuditLog
    edge: Edge
    rules: RulesCache


async def assemble(settings: ToolPlaneSettings) -> ToolPlane:
    # The tool plane's role is granted nothing in the learning schema.
    pool = await create_pool(
        settings.database_url.get_secret_value(),
        max_size=settings.database_pool_size,
        reads_learner_rows=False,
        transaction_pooling=settings.database_transaction_pooling,
    )
    channel = create_channel(settings.context_address, settings)
    audit = AuditLog(
        pool,
        flush_seconds=settings.audit_flush_seconds,
        batch_size=settings.audit_batch_size,
        max_pending=settings.audit_buffer_rows,
        statement_timeout=settings.audit_statement_timeout_seconds,
        grace_seconds=settings.grace_period_seconds,
        answer_wait_seconds=settings.audit_answer_wait_seconds,
    )
    audit.start()
    rules = RulesCache(
        RulesStore(pool),
        settings.listener_database_url(),
        max_age_seconds=settings.access_max_age_seconds,
        heartbeat_seconds=settings.access_heartbeat_seconds,
    )
    buckets = SharedBuckets(pool, timeout=settings.limits_timeout_seconds)
    context = ContextClient(channel, settings.context_timeout_seconds)
    registry = build_registry()
    router = ToolRouter(
        registry=registry,
        approvals=CallApprovals(
            pool,
            ttl_seconds=settings.approval_ttl_seconds,
            decide_seconds=settings.approval_decide_seconds,
            requests_per_hour=settings.approval_requests_per_hour,
            busy_wait_seconds=settings.approval_busy_wait_seconds,
        ),
        audit=audit,
        services=Services(
            context_service=context,
            pool=pool,
            docs=DocsLibrary(settings.docs_dir, settings.docs_base_url),
        ),
        environment=settings.environment,
        limiter=CallLimiter(settings.call_limits(), buckets),
    )
    auth_failures = FailedAuthentications(buckets, settings.auth_failures_per_minute)
    oauth_config = settings.oauth_config()
    # The authorization servers' metadata, keys and introspection; nothing else goes out.
    oauth_http = httpx.AsyncClient(follow_redirects=False)
    oauth = (
        OAuthVerifier(oauth_config, oauth_http, context.user_exists)
        if oauth_config is not None
        else None
    )
    authenticator = AgentAuthenticator(rules, auth_failures, oauth)
    people_config = settings.people_config()
    people = PeopleAuthenticator(
        pool,
        PersonVerifier(people_config, settings.people_clients, oauth_http)
        if people_config is not None
        else None,
    )
    mcp = McpEndpoint(
        router,
        registry,
        authenticator,
        body_timeout_seconds=settings.http_body_timeout_seconds,
        oauth=oauth_config,
    )
    browsers = OriginPolicy(settings.allowed_origins, settings.allowed_hosts)
    edge = Edge(
        create_app(mcp, browsers, oauth_config),
        settings.mcp_host,
        settings.mcp_port,
        settings.grace_period_seconds,
        header_timeout_seconds=settings.http_header_timeout_seconds,
    )
    setup = ServiceSetup(
        services=[
            Service.from_servicer(
                toolplane_service_pb2_grpc.add_ToolPlaneServiceServicer_to_server,
                ToolPlaneServicer(router, authenticator),
                toolplane_service_pb2.DESCRIPTOR.services_by_name["ToolPlaneService"],
            ),
            Service.from_servicer(
                toolplane_admin_service_pb2_grpc.add_ToolPlaneAdminServiceServicer_to_server,
                ToolPlaneAdminServicer(pool, ApprovalStore(pool), rules, people, context, registry),
                toolplane_admin_service_pb2.DESCRIPTOR.services_by_name["ToolPlaneAdminService"],
            ),
        ],
        acl=ACL,
        deadline_required=DEADLINE_REQUIRED,
        background=[edge.run, rules.run, audit.watch, buckets.purge_until],
        # Run last registered first: pending audit rows are written before the pool closes.
        cleanup=[
            partial(close_pool, pool, settings.audit_statement_timeout_seconds),
            channel.close,
            oauth_http.aclose,
            audit.close,
        ],
    )
    return ToolPlane(setup=setup, router=router, audit=audit, edge=edge, rules=rules)


async def close_pool(pool: Pool, seconds: float) -> None:
    """Close the pool, or terminate it when a connection does not let go in time (a hung
    database must not hold the process past its shutdown)."""
    try:
        await asyncio.wait_for(pool.close(), seconds)
    except TimeoutError:
        logger.warning("database pool did not close in time; terminating its connections")
        pool.terminate()


async def build(settings: ToolPlaneSettings) -> ServiceSetup:
    """Everything the tool plane serves, and how to clean it up."""
    return (await assemble(settings)).setup
