"""`nemo oauth-clients add|list|remove`: which agent each OAuth client acts as.

An MCP host signs a person in at the platform's authorization server as an OAuth client; the
access token names that client. The tool plane maps it to a registered agent through this table,
whose grants and policies then apply (narrowed by the token's scopes), and refuses a client it
cannot map with the id to add here. Every change reaches the tool plane at once (0023's
notification).
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from nemo_core.db import Connection, connect
from nemo_ops import operator_credential

HELP = "map OAuth clients (the MCP hosts people sign in with) to agents, list or remove them"


class OAuthClientError(ValueError):
    """The mapping cannot be changed as asked; the message says why."""


@dataclass(frozen=True)
class OAuthClient:
    client_id: str
    agent_id: str
    label: str
    created_at: datetime


async def add_client(
    conn: Connection,
    client_id: str,
    agent_id: str,
    label: str = "",
    *,
    added_by: str | None = None,
) -> None:
    """Map ``client_id`` to the existing agent ``agent_id``, recording the operator who did."""
    try:
        await conn.execute(
            "INSERT INTO toolplane.oauth_clients (client_id, agent_id, label, added_by) "
            "VALUES ($1, $2, $3, $4)",
            client_id,
            agent_id,
            label,
            added_by,
        )
    except asyncpg.UniqueViolationError:
        current = await conn.fetchval(
            "SELECT agent_id FROM toolplane.oauth_clients WHERE client_id = $1", client_id
        )
        raise OAuthClientError(
            f"client {client_id!r} already acts as {current}; remove it first"
        ) from None
    except asyncpg.ForeignKeyViolationError:
        raise OAuthClientError(f"no agent {agent_id!r}") from None
    except asyncpg.CheckViolationError:
        raise OAuthClientError(
            "a client id is 1 to 512 visible ASCII characters, as the token names it"
        ) from None


async def list_clients(conn: Connection) -> list[OAuthClient]:
    rows = await conn.fetch(
        "SELECT client_id, agent_id, label, created_at FROM toolplane.oauth_clients "
        "ORDER BY client_id"
    )
    return [OAuthClient(**dict(row)) for row in rows]


async def remove_client(conn: Connection, client_id: str) -> str:
    """Unmap ``client_id``; returns the agent it acted as."""
    agent_id: str | None = await conn.fetchval(
        "DELETE FROM toolplane.oauth_clients WHERE client_id = $1 RETURNING agent_id", client_id
    )
    if agent_id is None:
        raise OAuthClientError(f"no OAuth client {client_id!r}")
    return agent_id


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "An OAuth access token names the client (the MCP host) a person signed in with; the tool "
        "plane acts as the agent that client is mapped to here, and refuses a client mapped to "
        "none. `add CLIENT_ID AGENT_ID` maps one, `list` shows every mapping, `remove "
        "CLIENT_ID` unmaps one (its tokens are refused from the next call on). Adding and "
        "removing need your own operator credential; who added a client is recorded."
    )
    parser.add_argument("action", choices=("add", "list", "remove"))
    parser.add_argument("client_id", nargs="?", help="add, remove: the client id")
    parser.add_argument("agent_id", nargs="?", help="add: the agent it acts as")
    parser.add_argument("--label", default="", help="add: free text to recognise the host")
    operator_credential.add_argument(parser)


async def _run(args: argparse.Namespace) -> int:
    if args.action != "list" and not args.client_id:
        args.subparser.error(f"{args.action} needs a client id")
    if args.action == "add" and not args.agent_id:
        args.subparser.error("add needs the agent the client acts as")
    conn = await connect(args.database_url)
    try:
        operator = None
        if args.action != "list":
            operator = await operator_credential.require_operator(conn, args, "oauth-clients")
            if operator is None:
                return 1
        if args.action == "add":
            await add_client(
                conn,
                args.client_id,
                args.agent_id,
                args.label,
                added_by=operator.operator_id if operator else None,
            )
            print(f"OAuth client {args.client_id} acts as {args.agent_id}")
        elif args.action == "remove":
            agent_id = await remove_client(conn, args.client_id)
            print(f"OAuth client {args.client_id} no longer acts as {agent_id}")
        else:
            for client in await list_clients(conn):
                label = f"  {client.label}" if client.label else ""
                print(f"{client.client_id}\t{client.agent_id}{label}")
    finally:
        await conn.close()
    return 0


def run_command(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))
