"""The operator behind a `nemo` command that changes who may do what: issuing and revoking agent
tokens, mapping OAuth clients, deciding approvals. Holding the owner role's database URL proves
access to the database, not a person: each of these commands also takes the operator's own
credential (``$NEMO_OPERATOR_TOKEN`` or ``--operator-token-file``) and records who they are."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from nemo_core.db import Connection, Pool
from nemo_core.secret_files import read_secret_file
from nemo_toolplane import operators
from nemo_toolplane.operators import Operator

#: Where the operator's own credential comes from, unless --operator-token-file says.
OPERATOR_TOKEN_ENV = "NEMO_OPERATOR_TOKEN"  # noqa: S105  a variable name, not a token


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--operator-token-file",
        type=Path,
        help=f"file holding your operator credential (default: ${OPERATOR_TOKEN_ENV})",
    )


def operator_token(args: argparse.Namespace) -> str | None:
    if args.operator_token_file is not None:
        return read_secret_file(args.operator_token_file)
    return os.environ.get(OPERATOR_TOKEN_ENV)


async def require_operator(
    source: Pool | Connection, args: argparse.Namespace, command: str
) -> Operator | None:
    """The operator the command's credential proves; None (with one line on stderr) when it
    proves nobody."""
    operator = await operators.authenticate(source, operator_token(args))
    if operator is None:
        print(
            f"nemo {command}: error: no valid operator credential (set ${OPERATOR_TOKEN_ENV} or "
            "pass --operator-token-file): this is recorded as a person's action",
            file=sys.stderr,
        )
    return operator
