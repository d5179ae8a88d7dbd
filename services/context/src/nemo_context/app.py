"""Assembles the context service: database pool, servicer, ACL."""

from __future__ import annotations

import httpx

from nemo_context.acl import ACL
from nemo_context.builder import ContextBuilder
from nemo_context.conversation.builder import ConversationBuilder, ConversationSettings
from nemo_context.gate.text import prepare as prepare_gate
from nemo_context.gate.tokens import prepare as prepare_tokens
from nemo_context.pseudonym import pseudonymizer_from_settings
from nemo_context.repository import PostgresLearnerRepository
from nemo_context.rights.blocks import ProcessingBlocks
from nemo_context.rights.servicer import RightsServicer
from nemo_context.servicer import ContextServicer
from nemo_context.settings import ContextSettings
from nemo_context.snapshots.store import create_snapshot_store, master_key_from_settings
from nemo_core.db import create_pool
from nemo_core.people import PersonVerifier
from nemo_core.server import Service, ServiceSetup
from nemo_protos.context.v1 import (
    context_service_pb2,
    context_service_pb2_grpc,
    rights_service_pb2,
    rights_service_pb2_grpc,
)

SERVICE_NAME = "context"


async def build(settings: ContextSettings) -> ServiceSetup:
    """Everything the context server serves, and how to clean it up."""
    pool = await create_pool(
        settings.database_url.get_secret_value(),
        max_size=settings.database_pool_size,
        transaction_pooling=settings.database_transaction_pooling,
    )
    master = master_key_from_settings(settings)
    snapshots = create_snapshot_store(settings, pool, master)
    blocks = ProcessingBlocks(pool, master, on_erased=snapshots.keys.forget)
    prepare_gate()
    prepare_tokens()
    # One pseudonymizer for both builders: in development its key is random per process.
    pseudonymizer = pseudonymizer_from_settings(settings)
    identifier_key = settings.identifier_key_bytes()
    builder = ContextBuilder(
        PostgresLearnerRepository(pool, identifier_key=identifier_key), pseudonymizer
    )
    conversations = ConversationBuilder(
        pool, pseudonymizer, ConversationSettings.from_settings(settings, identifier_key)
    )
    # The authorization server's metadata and keys, for people's access tokens; nothing else.
    people_http = httpx.AsyncClient(follow_redirects=False)
    people_config = settings.people_config()
    people = (
        PersonVerifier(people_config, settings.people_clients, people_http)
        if people_config is not None
        else None
    )
    servicer = ContextServicer(
        settings=settings,
        pool=pool,
        snapshots=snapshots,
        builder=builder,
        conversations=conversations,
        blocks=blocks,
        pseudonymizer=pseudonymizer,
        people=people,
    )
    return ServiceSetup(
        services=[
            Service.from_servicer(
                context_service_pb2_grpc.add_ContextServiceServicer_to_server,
                servicer,
                context_service_pb2.DESCRIPTOR.services_by_name["ContextService"],
            ),
            Service.from_servicer(
                rights_service_pb2_grpc.add_RightsServiceServicer_to_server,
                RightsServicer(pool, master, pseudonymizer, people),
                rights_service_pb2.DESCRIPTOR.services_by_name["RightsService"],
            ),
        ],
        acl=ACL,
        # No deadline_required: no RPC here calls another service (snapshot writes are bounded
        # by their own timeout and never fail a build).
        # Run last registered first: snapshot clients close before the pool.
        cleanup=[pool.close, snapshots.aclose, people_http.aclose],
    )
