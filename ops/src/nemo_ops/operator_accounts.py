"""`nemo operators add|issue-token|revoke-token`: the people who decide approvals.

Each operator has credentials of their own, issued once (only the SHA-256 is stored) and revoked
like agent tokens; a decision records the operator its credential proves. Linking an operator to
their platform account (``--user``) keeps them from approving calls made on their own behalf.
"""

from __future__ import annotations

import argparse
import asyncio

from nemo_core.db import connect
from nemo_toolplane import operators

HELP = "register operators and issue or revoke their credentials for deciding approvals"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Operators decide approvals with credentials of their own. `add` registers one (with "
        "--user linking their platform account, so they cannot approve calls made for "
        "themselves); `issue-token` prints a new credential once; `revoke-token` ends one."
    )
    parser.add_argument("action", choices=("add", "issue-token", "revoke-token"))
    parser.add_argument(
        "id", help="the operator id (add, issue-token) or the credential's id (revoke-token)"
    )
    parser.add_argument("--name", default="", help="add: the person's name, for log readers")
    parser.add_argument("--user", dest="user_id", help="add: the operator's own platform user id")
    parser.add_argument("--label", default="", help="issue-token: free text to recognise it")


async def _run(args: argparse.Namespace) -> int:
    conn = await connect(args.database_url)
    try:
        if args.action == "add":
            await operators.add_operator(conn, args.id, name=args.name, user_id=args.user_id)
            linked = f", account {args.user_id}" if args.user_id else ""
            print(f"operator {args.id}{linked}")
        elif args.action == "issue-token":
            issued = await operators.issue_operator_token(conn, args.id, label=args.label)
            print(f"operator token id {issued.token_id} for {issued.operator_id}", flush=True)
            print(issued.token)
        else:
            revoked_at = await operators.revoke_operator_token(conn, args.id)
            print(f"operator token {args.id} revoked at {revoked_at.isoformat()}")
    finally:
        await conn.close()
    return 0


def run_command(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))
