"""`nemo issue-token` and `nemo revoke-token`: agent tokens for the tool plane."""

from __future__ import annotations

import argparse
import asyncio

from nemo_core.db import connect
from nemo_ops import operator_credential
from nemo_toolplane.tokens import issue_token, revoke_token

ISSUE_HELP = "issue an agent token (printed once; only its SHA-256 is stored)"
REVOKE_HELP = "revoke an agent token by its id"


def configure_issue(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Issue a token for an agent of the tool plane, bound to the user it acts for. The token "
        "is printed once on stdout; the database keeps only its SHA-256. A token bound to a user "
        "ignores the X-Nemo12-User-Id header. A token bound to no user reaches no learner through "
        "grants scoped to the user (a user id the agent sends is recorded, never trusted), so for "
        "an agent holding such grants it is issued only with --unbound. Issuing is an operator's "
        "act: it needs your own credential and records who issued the token."
    )
    parser.add_argument("agent_id", help="agent id, for example learning-agent")
    bind = parser.add_mutually_exclusive_group()
    bind.add_argument("--user", dest="user_id", help="bind the token to this user id")
    bind.add_argument(
        "--unbound",
        action="store_true",
        help="issue a token bound to no user even though the agent holds user-scoped grants",
    )
    parser.add_argument("--label", default="", help="free text to recognise the token later")
    operator_credential.add_argument(parser)


async def _issue(args: argparse.Namespace) -> int:
    conn = await connect(args.database_url)
    try:
        operator = await operator_credential.require_operator(conn, args, "issue-token")
        if operator is None:
            return 1
        issued = await issue_token(
            conn,
            args.agent_id,
            user_id=args.user_id,
            label=args.label,
            unbound=args.unbound,
            issued_by=operator.operator_id,
        )
    finally:
        await conn.close()
    bound = f" bound to {issued.user_id}" if issued.user_id else " (not bound to a user)"
    print(f"token id {issued.token_id} for {issued.agent_id}{bound}")
    print(f"this token {issued.reach}", flush=True)
    print(issued.token)
    return 0


def run_issue(args: argparse.Namespace) -> int:
    return asyncio.run(_issue(args))


def configure_revoke(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Revoke an agent token; calls with it are refused from then on. Needs your own operator "
        "credential, and records who revoked it."
    )
    parser.add_argument("token_id", help="the id printed by issue-token")
    operator_credential.add_argument(parser)


async def _revoke(args: argparse.Namespace) -> int:
    conn = await connect(args.database_url)
    try:
        operator = await operator_credential.require_operator(conn, args, "revoke-token")
        if operator is None:
            return 1
        revoked_at = await revoke_token(conn, args.token_id, revoked_by=operator.operator_id)
    finally:
        await conn.close()
    print(f"token {args.token_id} revoked at {revoked_at.isoformat()}")
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    return asyncio.run(_revoke(args))
