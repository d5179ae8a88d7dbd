"""PostgreSQL helpers shared by the services: connections, pools and learner-bound transactions.

Learner-keyed tables carry row-level security that shows a transaction only the learners bound
to it (``nemo.learner_ids``). :func:`learner_transaction` is the one way to bind them::

    pool = await create_pool(settings.database_url)
    async with learner_transaction(pool, ["L-2041-1"], readonly=True) as conn:
        rows = await conn.fetch("SELECT node_id, mastery FROM learning.mastery")  # L-2041-1 only

Behind a pooler in transaction mode (PgBouncer ``pool_mode = transaction``), consecutive
statements of one client may run on different server connections, so nothing may live in a
server session: pass ``transaction_pooling=True`` to :func:`create_pool` and :func:`connect`, which
turns off asyncpg's statement cache (its named prepared statements belong to one server session).
The learner binding is transaction-local, so it holds through such a pooler unchanged; LISTEN,
session advisory locks and session ``SET`` do not, and need a direct connection.
"""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import AsyncIterator, Collection
from contextlib import AbstractContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, TypeAlias
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import asyncpg
import grpc
from asyncpg.pool import PoolConnectionProxy
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import TracerProvider

from nemo_core.errors import ServiceError, map_exceptions, shared_error
from nemo_core.telemetry import WithoutErrorMessages, add_instrumentation
from nemo_protos.type.v1.error_reason_pb2 import ErrorReason

__all__ = [
    "LEARNER_IDS_SETTING",
    "Connection",
    "NestedLearnerTransactionError",
    "Pool",
    "connect",
    "create_pool",
    "database_unavailable",
    "dsn_with",
    "init_connection",
    "is_database_unavailable",
    "learner_transaction",
    "untraced",
]

#: Transaction-local setting read by the row-level security policies of the learning schema.
LEARNER_IDS_SETTING = "nemo.learner_ids"
_RESET_BINDING = f"RESET {LEARNER_IDS_SETTING}"

Connection: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"
Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"


#: Errors that mean the server is gone or refusing connections, not that the statement is wrong.
_UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresConnectionError,  # SQLSTATE class 08
    asyncpg.exceptions.ConnectionDoesNotExistError,  # the connection died under the statement
    asyncpg.exceptions.CannotConnectNowError,  # starting up or shutting down
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.TooManyConnectionsError,
    ConnectionError,  # refused or reset at the socket
    # A server that accepts but does not answer: asyncpg's connect, pool acquire and command
    # timeouts (and a kernel connect timeout) all raise this.
    TimeoutError,
    socket.gaierror,  # its host name does not resolve (DNS down, Service gone in a failover)
)
#: Socket errors of a connect to a server that is not there (a Unix socket file that is gone).
_UNREACHABLE_ERRNOS = frozenset({errno.ECONNREFUSED, errno.ENOENT, errno.EHOSTUNREACH})


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says PostgreSQL cannot be reached now (worth a retry later), as opposed to
    a statement or data error.

    Any ``TimeoutError`` counts: the services handle their other timeouts (model providers,
    snapshot writes) where they happen, so one that escapes a handler comes from asyncpg.
    """
    if isinstance(exc, _UNAVAILABLE_ERRORS):
        return True
    # File errors carry a filename; socket connect errors do not.
    return isinstance(exc, OSError) and exc.filename is None and exc.errno in _UNREACHABLE_ERRNOS


def database_unavailable() -> ServiceError:
    """What the caller sees of a database that cannot be reached: none of asyncpg's text."""
    return shared_error(
        grpc.StatusCode.UNAVAILABLE,
        ErrorReason.DATABASE_UNAVAILABLE,
        "the database is unavailable",
    )


def _instrument(provider: TracerProvider) -> None:
    # Query parameters can hold learner data, so they never go on spans: not as attributes, and
    # not inside a database error's message (which often quotes the offending value).
    AsyncPGInstrumentor(capture_parameters=False).instrument(  # type: ignore[no-untyped-call]
        tracer_provider=WithoutErrorMessages(provider)
    )


# A process that uses the database maps its outages and traces its queries; one that never
# imports this module (the gateway) ships neither asyncpg nor its instrumentation.
map_exceptions(is_database_unavailable, database_unavailable)
add_instrumentation(_instrument)


def _dump_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def init_connection(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """Decode ``json``/``jsonb`` to Python values and encode Python values into them."""
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(
            type_name, encoder=_dump_json, decoder=json.loads, schema="pg_catalog"
        )


def _statement_cache_size(transaction_pooling: bool) -> int:
    # asyncpg's default; none through a transaction pooler, where its named prepared statements
    # would be looked up on server connections that never saw them. Unnamed statements are
    # parsed again with every execution then, which such a pooler keeps on one connection.
    return 0 if transaction_pooling else 100


async def connect(
    dsn: str,
    *,
    connect_timeout: float = 10.0,
    transaction_pooling: bool = False,
    application_name: str | None = None,
) -> asyncpg.Connection[asyncpg.Record]:
    """Open one connection with the JSON codecs of :func:`init_connection`;
    ``transaction_pooling`` when ``dsn`` goes through a transaction-mode pooler;
    ``application_name`` names the session in ``pg_stat_activity``."""
    conn = await asyncpg.connect(
        dsn,
        timeout=connect_timeout,
        statement_cache_size=_statement_cache_size(transaction_pooling),
        server_settings={"application_name": application_name} if application_name else None,
    )
    try:
        await init_connection(conn)
    except BaseException:
        await conn.close()
        raise
    return conn


def untraced() -> AbstractContextManager[None]:
    """Statements run inside are not traced: for a write that batches the work of many calls,
    whose span would belong to none of their traces."""
    return suppress_instrumentation()


async def _reset_learner_binding(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """Pool release hook: the learner binding never reaches the next user of a connection.

    asyncpg rolls back an open transaction first. Bindings are transaction-local, but a
    session-level ``set_config(..., false)`` or ``SET`` would outlive the transaction and show its
    learners to whatever runs next on the connection, so the setting is reset on every release.
    asyncpg's own reset query (RESET ALL, UNLISTEN, advisory unlocks) would cost the same round
    trip for state the services never create.
    """
    with suppress_instrumentation():
        await conn.execute(_RESET_BINDING)


async def _keep_session(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """Pool release hook of a role that can read no learner row, or of a connection through a
    transaction pooler: nothing to reset (asyncpg has already rolled back an open
    transaction)."""


async def create_pool(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    command_timeout: float | None = None,
    connect_timeout: float = 5.0,
    reads_learner_rows: bool = True,
    transaction_pooling: bool = False,
) -> Pool:
    """Create a connection pool whose connections use the JSON codecs of :func:`init_connection`.

    ``connect_timeout`` bounds each new connection, so a server that does not answer fails the
    call that needed it instead of holding it. Every release resets the learner binding (one
    round trip) unless ``reads_learner_rows`` is False: for a role granted nothing in the
    learning schema (the tool plane's), a binding shows no row, so it is not worth a round trip
    on every release.

    ``transaction_pooling``: ``dsn`` goes through a transaction-mode pooler. The statement cache
    is off then, and releases reset nothing either: a reset would run on whichever server
    connection the pooler picks, so it could protect nothing. What holds there is that the
    binding is transaction-local (``tests/pooled`` runs clients through one server connection).
    """
    resets_binding = reads_learner_rows and not transaction_pooling
    return await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        command_timeout=command_timeout,
        timeout=connect_timeout,
        init=init_connection,
        reset=_reset_learner_binding if resets_binding else _keep_session,
        statement_cache_size=_statement_cache_size(transaction_pooling),
    )


class NestedLearnerTransactionError(RuntimeError):
    """A learner transaction was opened on a connection that is already in a transaction.

    Inside one transaction a second binding would silently replace the first for the rest of the
    outer transaction (a savepoint does not undo ``set_config``), so nesting is refused.
    """


def _learner_ids_value(learner_ids: Collection[str]) -> str:
    if isinstance(learner_ids, str):
        # A bare string would be bound character by character.
        raise TypeError("learner_ids must be a collection of ids, not a string")
    for learner_id in learner_ids:
        # The policies split the setting on commas: an id containing one would bind two.
        if not learner_id or "," in learner_id:
            raise ValueError(f"invalid learner id for binding: {learner_id!r}")
    return ",".join(learner_ids)


@asynccontextmanager
async def learner_transaction(
    source: Pool | Connection,
    learner_ids: Collection[str],
    *,
    readonly: bool = False,
) -> AsyncIterator[Connection]:
    """Open a transaction in which row-level security shows only ``learner_ids``' rows.

    ``source`` is a pool (a connection is acquired for the transaction and released after it)
    or a connection that is not already in a transaction: a connection in one (another learner
    transaction included) raises :class:`NestedLearnerTransactionError`. The binding is
    transaction-local, so it ends with the transaction, and the pool resets it on release in
    case anything set it for the session. An empty collection binds nothing: learner-keyed
    tables then return no rows.

    Only the statements run inside are traced: BEGIN, the binding and COMMIT would add three
    spans to every read that tell a trace reader nothing the enclosing span does not.
    """
    value = _learner_ids_value(learner_ids)
    if isinstance(source, asyncpg.Pool):
        async with source.acquire() as conn, _BoundTransaction(conn, value, readonly=readonly):
            yield conn
        return
    if source.is_in_transaction():
        raise NestedLearnerTransactionError(
            "learner_transaction on a connection that is already in a transaction"
        )
    async with _BoundTransaction(source, value, readonly=readonly):
        yield source


class _BoundTransaction:
    """asyncpg's transaction, untraced, with the learner binding set as it starts."""

    def __init__(self, conn: Connection, learner_ids: str, *, readonly: bool) -> None:
        self._conn = conn
        self._learner_ids = learner_ids
        self._transaction = conn.transaction(readonly=readonly)

    async def __aenter__(self) -> None:
        with suppress_instrumentation():
            await self._transaction.__aenter__()
            try:
                await self._conn.execute(
                    "SELECT set_config($1, $2, true)", LEARNER_IDS_SETTING, self._learner_ids
                )
            except BaseException as error:
                await self._transaction.__aexit__(type(error), error, error.__traceback__)
                raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with suppress_instrumentation():
            await self._transaction.__aexit__(exc_type, exc, traceback)


def dsn_with(
    dsn: str,
    *,
    user: str | None = None,
    password: str | None = None,
    database: str | None = None,
) -> str:
    """Return ``dsn`` (a ``postgresql://`` URL) with another user, password or database.

    Query parameters (such as ``host=/path/to/socket``) are kept. Changing the user drops the
    old password unless a new one is given.
    """
    parts = urlsplit(dsn)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError("expected a postgresql:// URL")
    old_user = unquote(parts.username) if parts.username is not None else None
    old_password = unquote(parts.password) if parts.password is not None else None
    host = parts.netloc.rpartition("@")[2]
    new_user = user if user is not None else old_user
    if password is not None:
        new_password: str | None = password
    elif user is not None and user != old_user:
        new_password = None
    else:
        new_password = old_password
    userinfo = quote(new_user, safe="") if new_user else ""
    if new_password is not None and userinfo:
        userinfo += ":" + quote(new_password, safe="")
    netloc = f"{userinfo}@{host}" if userinfo else host
    path = "/" + quote(database, safe="") if database is not None else parts.path
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))
