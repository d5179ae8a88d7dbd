"""`nemo approvals list|approve|reject`: operators decide on calls waiting for approval."""

from __future__ import annotations

import argparse
import asyncio
import sys

from nemo_core.db import create_pool
from nemo_ops import operator_credential
from nemo_ops.operator_credential import OPERATOR_TOKEN_ENV
from nemo_toolplane.approvals import (
    Approval,
    ApprovalError,
    ApprovalStatus,
    ApprovalStore,
    Decider,
)

HELP = "list, approve or reject tool calls waiting for a person's approval"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "A tool call that needs approval waits as an approval request bound to its agent, user, "
        "tool version and arguments. Each request is listed with what the call is about and the "
        "arguments it would run with: read them before deciding. Approving lets the same call "
        "run once when the agent repeats it before the request expires; rejecting refuses it. "
        f"Deciding needs your own operator credential (${OPERATOR_TOKEN_ENV}, or "
        "--operator-token-file; see `nemo operators`): the decision records who you are, and "
        "nobody decides a call made on their own behalf or with a token they issued. A request "
        "nobody decides in time is denied."
    )
    parser.add_argument("action", choices=("list", "approve", "reject"))
    parser.add_argument("approval_id", nargs="?", help="the approval to decide")
    parser.add_argument(
        "--status",
        choices=[status.value for status in ApprovalStatus],
        help="list only approvals in this state (default: all)",
    )
    parser.add_argument("--limit", type=int, default=50, help="most approvals to list (1-200)")
    operator_credential.add_argument(parser)
    parser.add_argument("--note", default="", help="why (recorded with the decision)")


def _describe(approval: Approval) -> str:
    """One line about the request, then what the call would do: its resource and arguments."""
    return (
        f"{approval.approval_id}  {approval.status:<9} {approval.agent_id:<18} "
        f"{approval.user_id or '-':<8} {approval.tool_id:<28} {approval.policy_version:<30} "
        f"decide by {_moment(approval)} "
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
        operator = await operator_credential.require_operator(pool, args, "approvals")
        if operator is None:
            return 1
        decided = await store.decide(
            args.approval_id,
            approve=args.action == "approve",
            decider=Decider(operator.operator_id, operator.token_id, operator.identities),
            note=args.note,
        )
        print(_describe(decided))
        return 0
    except ApprovalError as error:
        print(f"nemo approvals: error: {error}", file=sys.stderr)
        return 1
    finally:
        await pool.close()


def _moment(approval: Approval) -> str:
    deadline = approval.decide_by or approval.expires_at
    return deadline.isoformat(timespec="seconds")


def run_command(args: argparse.Namespace) -> int:
    if args.action == "list":
        if not 1 <= args.limit <= 200:
            args.subparser.error("--limit must be between 1 and 200")
    elif not args.approval_id:
        args.subparser.error(f"{args.action} needs an approval id")
    return asyncio.run(_run(args))
