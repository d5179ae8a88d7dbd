"""The ``nemo`` command: one entry point for every operational task.

Each subcommand lives in its own module, which provides ``HELP`` (one line for the command
list), ``configure_parser(parser)`` (its arguments and description) and ``run_command(args)``
(returns the exit code). Adding a command means adding a :class:`Subcommand` to
:data:`SUBCOMMANDS`.

Exit codes: 0 success, 1 failure (the reason is printed on stderr), 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from nemo_devtools.oauth_server import AuthorizationServerUnavailable
from nemo_ops import (
    agent_tokens,
    approvals,
    capacity_manifests,
    dev,
    local_model,
    migrate,
    oauth_clients,
    oauth_token,
    operator_accounts,
    policies,
    purge,
    retention,
    rights,
    seed,
    settings_doc,
    sync_tools,
)
from nemo_ops.embedded_pg import EmbeddedPostgresError
from nemo_toolplane.tokens import TokenError

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    #: Adds ``--database-url`` (default ``$DATABASE_URL``) and requires one of them.
    needs_database: bool = False


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("migrate", migrate.HELP, migrate.configure_parser, migrate.run_command, True),
    Subcommand("seed", seed.HELP, seed.configure_parser, seed.run_command, True),
    Subcommand("dev", dev.HELP, dev.configure_parser, dev.run_command),
    Subcommand(
        "issue-token",
        agent_tokens.ISSUE_HELP,
        agent_tokens.configure_issue,
        agent_tokens.run_issue,
        True,
    ),
    Subcommand(
        "revoke-token",
        agent_tokens.REVOKE_HELP,
        agent_tokens.configure_revoke,
        agent_tokens.run_revoke,
        True,
    ),
    Subcommand(
        "settings", settings_doc.HELP, settings_doc.configure_parser, settings_doc.run_command
    ),
    Subcommand("purge", purge.HELP, purge.configure_parser, purge.run_command, True),
    Subcommand("retention", retention.HELP, retention.configure_parser, retention.run_command),
    Subcommand("rights", rights.HELP, rights.configure_parser, rights.run_command, True),
    Subcommand(
        "sync-tools", sync_tools.HELP, sync_tools.configure_parser, sync_tools.run_command, True
    ),
    Subcommand(
        "approvals", approvals.HELP, approvals.configure_parser, approvals.run_command, True
    ),
    Subcommand("policies", policies.HELP, policies.configure_parser, policies.run_command, True),
    Subcommand(
        "capacity",
        capacity_manifests.HELP,
        capacity_manifests.configure_parser,
        capacity_manifests.run_command,
    ),
    Subcommand(
        "operators",
        operator_accounts.HELP,
        operator_accounts.configure_parser,
        operator_accounts.run_command,
        True,
    ),
    Subcommand(
        "oauth-clients",
        oauth_clients.HELP,
        oauth_clients.configure_parser,
        oauth_clients.run_command,
        True,
    ),
)

# Failures the user can act on: reported as one line, without a traceback.
_EXPECTED_FAILURES: tuple[type[BaseException], ...] = (
    dev.DevStackError,
    local_model.LocalModelUnavailable,
    AuthorizationServerUnavailable,
    oauth_token.OAuthTokenError,
    EmbeddedPostgresError,
    ValueError,  # a malformed URL or value given on the command line or in the environment
    migrate.MigrationError,
    seed.SeedError,
    TokenError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    OSError,
    TimeoutError,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nemo",
        description="Operate the Nemo AI plane: database, demo data and local stack.",
        epilog="Exit codes: 0 success, 1 failure, 2 usage error.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in SUBCOMMANDS:
        subparser = subparsers.add_parser(command.name, help=command.help)
        command.configure(subparser)
        if command.needs_database:
            subparser.add_argument(
                "--database-url",
                metavar="URL",
                default=_database_url_from_environment(),
                help="PostgreSQL URL of a role that owns the schemas (default: $DATABASE_URL, "
                "or the content of the file $DATABASE_URL_FILE names, a mounted Secret)",
            )
        subparser.set_defaults(subcommand=command, subparser=subparser)
    return parser


def _database_url_from_environment() -> str | None:
    path = os.environ.get("DATABASE_URL_FILE")
    if not path:
        return os.environ.get("DATABASE_URL")
    if os.environ.get("DATABASE_URL"):
        raise SystemExit("nemo: set DATABASE_URL or DATABASE_URL_FILE, not both")
    # A Secret mounted as a file often ends with a newline that is not part of the URL.
    return Path(path).read_text(encoding="utf-8").strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command: Subcommand = args.subcommand
    if command.needs_database and not args.database_url:
        args.subparser.error(
            "no database: pass --database-url or set DATABASE_URL or DATABASE_URL_FILE"
        )
    try:
        return command.run(args)
    except _EXPECTED_FAILURES as error:
        print(f"nemo {command.name}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"nemo {command.name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
