"""``nemo retention``: the retention table, as privacy staff and auditors read it."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from nemo_context.rights.retention import RETENTION, render_table

HELP = "print the retention table: every store that holds something about a learner"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Every store of the AI plane that holds something about a learner: what it holds, "
        "why, how long, and what expiry (`nemo purge`) and erasure (`nemo rights erase`) do "
        "to it."
    )
    parser.add_argument(
        "--format", choices=("table", "markdown", "json"), default="table", help="output form"
    )


def run_command(args: argparse.Namespace) -> int:
    if args.format == "markdown":
        print(render_table())
    elif args.format == "json":
        print(json.dumps([asdict(rule) for rule in RETENTION], indent=2, ensure_ascii=False))
    else:
        for rule in RETENTION:
            print(f"{rule.store:<16} {rule.period}")
            print(f"{'':<16} where:      {rule.location}")
            print(f"{'':<16} holds:      {rule.holds}")
            print(f"{'':<16} purpose:    {rule.purpose}")
            print(f"{'':<16} on expiry:  {rule.on_expiry} (from {rule.counted_from})")
            print(f"{'':<16} on erasure: {rule.on_erasure}")
    return 0
