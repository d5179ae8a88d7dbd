"""`nemo sync-tools`: reconcile the tools table with the tool plane's code registry."""

from __future__ import annotations

import argparse
import asyncio

from nemo_core.db import connect
from nemo_toolplane.tool_sync import sync_tools
from nemo_toolplane.tools import build_registry

HELP = "reconcile toolplane.tools with the tool registry in code"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Upsert every tool version of the tool plane's code registry into toolplane.tools and "
        "remove versions that left the code. The code is the source of truth; the table is the "
        "projection grants, policies and operators read."
    )
    parser.add_argument("--dry-run", action="store_true", help="only print what would change")


async def _sync(args: argparse.Namespace) -> int:
    conn = await connect(args.database_url)
    try:
        report = await sync_tools(conn, build_registry(), dry_run=args.dry_run)
    finally:
        await conn.close()
    for label, tool_ids in (
        ("added", report.added),
        ("updated", report.updated),
        ("removed", report.removed),
    ):
        for tool_id in tool_ids:
            print(f"{label:<8} {tool_id}")
    summary = (
        f"{len(report.added)} added, {len(report.updated)} updated, {len(report.removed)} removed, "
        f"{len(report.unchanged)} unchanged"
    )
    print(summary + (" (dry run: nothing written)" if args.dry_run else ""))
    return 0


def run_command(args: argparse.Namespace) -> int:
    return asyncio.run(_sync(args))
