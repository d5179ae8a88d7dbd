"""`nemo approvals list|approve|reject`: operators decide on calls waiting for approval."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from nemo_core.db import create_pool
from nemo_core.secret_files import read_secret_file
from nemo_toolplane import operators
from nemo_toolplane.approvals import Approval, ApprovalError, ApprovalStatus, ApprovalStore

#: Where the deciding operator's own credential comes from, unless --operator-token-file says.
OPERATOR_TOKEN_ENV = "NEMO_OPERATOR_TOKEN"  # noqa: S105  a variable name, not a token

HELP = "list, approve or reject tool calls waiting for a person's approval"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "A tool call that needs approval waits as an approval request bound to its agent, user, "
        "tool version and arguments. Each request is listed with what the call is about and the "
        "arguments it would run with: read them before deciding. Approving lets the same call "
        "run once when the agent repeats it before the request expires; rejecting refuses it. "
        f"Deciding needs your own operator credential (${OPERATOR_TOKEN_ENV}, or "
        "--operator-token-file; see `nemo operators`): the decision records who you are, and "
        "nobody decides a call made on their own behalf."
    )
    parser.add_argument("action", choices=("list", "approve", "reject"))
    parser.add_argument("approval_id", nargs="?", help="the approval to decide")
    parser.add_argument(
        "--status",
        choices=[status.value for status in ApprovalStatus],
        help="list only approvals in this state (default: all)",
    )
    parser.add_argument("--limit", type=int, default=50, help="most approvals to list (1-200)")
    parser.add_argument(
        "--operator-token-file",
        type=Path,
        help=f"file holding your operator credential (default: ${OPERATOR_TOKEN_ENV})",
    )
    parser.add_argument("--note", default="", help="why (recorded with the decision)")


def _describe(approval: Approval) -> str:
    """One line about the request, then what the call would do: its resource and arguments."""
    return (
        f"{approval.approval_id}  {approval.status:<9} {approval.agent_id:<18} "
        f"{approval.user_id or '-':<8} {approval.tool_id:<28} {approval.policy_version:<30} "
        f"expires {approval.expires_at.isoformat(timespec='seconds')}\n"
        f"    resource:  {approval.resource or '-'}\n"
        f"    arguments: {approval.arguments_json or '(not recorded)'}"
    )


async def _run(args: argparse.Namespace) -> int:
    pool = await create_pool(args.database_url, min_size=1, max_size=1)
    store = ApprovalStore(pool)
    try:
        if args.action == "list":
            status = ApprovalStatus(args.status) if args.status else None
            approvals, _ = await store.list(status=status, limit=args.limit, after=None)
            for approval in approvals:
                print(_describe(approval))
            print(f"{len(approvals)} approval(s)", file=sys.stderr)
            return 0
        operator = await operators.authenticate(pool, operator_token(args))
        if operator is None:
            print(
                "nemo approvals: error: no valid operator credential "
                f"(set ${OPERATOR_TOKEN_ENV} or pass --operator-token-file)",
                file=sys.stderr,
            )
            return 1
        decided = await store.decide(
            args.approval_id,
            approve=args.action == "approve",
            operator=operator,
            note=args.note,
        )
        print(_describe(decided))
        return 0
    except ApprovalError as error:
        print(f"nemo approvals: error: {error}", file=sys.stderr)
        return 1
    finally:
        await pool.close()


def operator_token(args: argparse.Namespace) -> str | None:
    if args.operator_token_file is not None:
        return read_secret_file(args.operator_token_file)
    return os.environ.get(OPERATOR_TOKEN_ENV)


def run_command(args: argparse.Namespace) -> int:
    if args.action == "list":
        if not 1 <= args.limit <= 200:
            args.subparser.error("--limit must be between 1 and 200")
    elif not args.approval_id:
        args.subparser.error(f"{args.action} needs an approval id")
    return asyncio.run(_run(args))
