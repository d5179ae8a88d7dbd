"""`nemo policies check`: report stored grants and policies that can never match."""

from __future__ import annotations

import argparse
import asyncio
import sys

from nemo_core.db import connect
from nemo_toolplane.administration import dead_rules
from nemo_toolplane.tools import build_registry

HELP = "check stored grants and policies for rows that can never match"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Read every grant and enabled policy as the policy engine would and report each row that "
        "can never match: broken conditions (a broken deny policy denies nothing), unknown "
        "environments, modes, effects or resource scopes (a policy scoped to a family or to the "
        "user never matches: policies name learners), tool patterns no registered tool has, "
        "agent scopes no agent has, conditions no tool in scope meets. Exits 1 when it finds any."
    )
    parser.add_argument("action", choices=("check",))


async def _check(database_url: str) -> int:
    conn = await connect(database_url)
    try:
        grants, policies, findings = await dead_rules(conn, build_registry())
    finally:
        await conn.close()
    for finding in findings:
        print(finding)
    print(
        f"{grants} grant(s), {policies} polic(ies): {len(findings)} problem(s)",
        file=sys.stderr,
    )
    return 1 if findings else 0


def run_command(args: argparse.Namespace) -> int:
    return asyncio.run(_check(args.database_url))
