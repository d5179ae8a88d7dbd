"""`nemo rights`: privacy staff handle a family's export, erasure and restriction requests.

Every action is an operator's (``$NEMO_OPERATOR_TOKEN`` or ``--operator-token-file``) and is
recorded on the request with its clocks. The command needs the owner database URL and the
context service's settings: where snapshots live (``NEMO_CONTEXT_SNAPSHOT_*``), and the two
keys that name learners (``NEMO_CONTEXT_PSEUDONYM_KEY_FILE``,
``NEMO_CONTEXT_SNAPSHOT_MASTER_KEY_FILE``). ``.nemo/dev.env`` names all of them for the local
stack.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from pydantic import SecretStr, ValidationError

from nemo_context.pseudonym import Pseudonymizer
from nemo_context.rights import requests as rights_requests
from nemo_context.rights.requests import Kind, RequestError, RightsRequest
from nemo_context.rights.subjects import Identities
from nemo_context.settings import ContextSettings
from nemo_context.snapshots.keys import MasterKey
from nemo_context.snapshots.store import create_snapshot_objects
from nemo_core.db import create_pool
from nemo_core.identifiers import KEY_RULE, is_key
from nemo_ops import learner_rights, operator_credential
from nemo_ops.learner_rights import RightsWork
from nemo_ops.operator_credential import OPERATOR_TOKEN_ENV, operator_token
from nemo_toolplane import operators

HELP = "handle a family's export, erasure and restriction requests"

_ACTIONS = ("list", "show", "export", "erase", "restrict", "lift", "replay", "process")


class RightsCommandError(Exception):
    """The command cannot run as asked; the message says why."""


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "A family's request about a learner's data, with its clocks (acknowledge within 2 "
        "working days, complete within 15 days): `list` (overdue first) and `show` read them; "
        "`export` writes everything the AI plane holds about the learner to a new directory; "
        "`erase` removes it, with a ledger entry written first and a verified receipt; "
        "`restrict` stops every build for the learner until `lift`; `replay` erases again "
        "after a database restore from a backup older than an erasure; `process` carries out "
        "the erasures the platform recorded through RightsService (the nightly purge job runs "
        "it). Acting, except `process`, needs your operator credential "
        f"(${OPERATOR_TOKEN_ENV} or --operator-token-file)."
    )
    parser.add_argument("action", choices=_ACTIONS)
    parser.add_argument("--learner", metavar="ID", help="the learner the request is about")
    parser.add_argument("--request-id", metavar="R", help="the request (ticket) id")
    parser.add_argument(
        "--requested-by",
        metavar="USER",
        default="",
        help="the platform user who asked (a parent, the learner, a guardian)",
    )
    parser.add_argument("--out", type=Path, metavar="DIR", help="export: a new directory")
    parser.add_argument("--limit", type=int, default=50, help="list: most requests (1-500)")
    operator_credential.add_argument(parser)


def _settings(database_url: str) -> ContextSettings:
    try:
        settings = ContextSettings(database_url=SecretStr(database_url))
    except ValidationError as error:
        first = error.errors()[0]
        location = ".".join(str(part) for part in first["loc"]) or "settings"
        raise RightsCommandError(f"invalid context settings ({location}): {first['msg']}") from None
    if settings.pseudonym_key is None or settings.snapshot_master_key is None:
        raise RightsCommandError(
            "the learner's names need the context service's keys: set "
            "NEMO_CONTEXT_PSEUDONYM_KEY_FILE and NEMO_CONTEXT_SNAPSHOT_MASTER_KEY_FILE "
            "(sourcing .nemo/dev.env does, for the local stack)"
        )
    return settings


def identities_from(settings: ContextSettings) -> Identities:
    """The keys that name learners, as the context service has them."""
    assert settings.pseudonym_key is not None  # noqa: S101  checked by _settings
    assert settings.snapshot_master_key is not None  # noqa: S101
    return Identities(
        MasterKey(settings.snapshot_master_key.get_secret_value().encode("utf-8")),
        Pseudonymizer(settings.pseudonym_key.get_secret_value().encode("utf-8")),
    )


@asynccontextmanager
async def rights_work(args: argparse.Namespace, *, acting: bool) -> AsyncIterator[RightsWork]:
    settings = _settings(args.database_url)
    pool = await create_pool(args.database_url, min_size=1, max_size=2)
    objects = create_snapshot_objects(settings)
    try:
        actor = "nemo rights"
        if acting:
            operator = await operators.authenticate(pool, operator_token(args))
            if operator is None:
                raise RightsCommandError(
                    f"no valid operator credential (set ${OPERATOR_TOKEN_ENV} or pass "
                    "--operator-token-file)"
                )
            actor = f"operator:{operator.operator_id}"
        yield RightsWork(pool, objects, identities_from(settings), actor)
    finally:
        await objects.aclose()
        await pool.close()


def _line(request: RightsRequest, now: datetime) -> str:
    late = "OVERDUE " if request.overdue(now) else ""
    acknowledged = (
        request.acknowledged_at.isoformat(timespec="minutes") if request.acknowledged_at else "-"
    )
    return (
        f"{late}{request.request_id}  {request.kind:<11} {request.state:<12} "
        f"received {request.received_at.isoformat(timespec='minutes')}  "
        f"acknowledge by {request.acknowledge_by.isoformat(timespec='minutes')} "
        f"(done {acknowledged})  complete by {request.complete_by.isoformat(timespec='minutes')}"
    )


def _progress(message: str) -> None:
    print(f"nemo rights: {message}", file=sys.stderr, flush=True)


async def _read(args: argparse.Namespace) -> int:
    async with rights_work(args, acting=False) as work, work.pool.acquire() as conn:
        now = datetime.now(UTC)
        if args.action == "list":
            found = await rights_requests.list_requests(conn, now, args.limit)
            for request in found:
                print(_line(request, now))
            _progress(f"{len(found)} request(s), overdue ones first")
            return 0
        shown = await rights_requests.get_request(conn, args.request_id)
        if shown is None:
            raise RightsCommandError(f"no request {args.request_id}")
        print(_line(shown, now))
        for event in await rights_requests.events(conn, args.request_id):
            at = event["at"].isoformat(timespec="seconds")
            print(f"  {at}  {event['step']:<13} {event['actor']}  {event['detail']}")
        if shown.receipt is not None:
            print(learner_rights.receipt_text(shown.receipt))
        return 0


async def _process(args: argparse.Namespace) -> int:
    async with rights_work(args, acting=False) as work:
        work = dataclasses.replace(work, actor="nemo rights process")
        receipts = await learner_rights.process(work, _progress)
    _progress(f"carried out {len(receipts)} erasure(s)")
    return 0 if all(receipt["verified"] for receipt in receipts) else 1


async def _act(args: argparse.Namespace) -> int:
    async with rights_work(args, acting=True) as work:
        if args.action == "erase":
            receipt = await learner_rights.erase(
                work, args.learner, args.request_id, args.requested_by or "-"
            )
            print(learner_rights.receipt_text(receipt))
            if not receipt["verified"]:
                _progress("traces are left (listed above); run the same command again")
                return 1
            return 0
        if args.action == "export":
            manifest = await learner_rights.export(
                work, args.learner, args.request_id, args.requested_by or "-", args.out
            )
            _progress(f"wrote {len(manifest['files']) + 2} file(s) to {args.out}")
            return 0
        if args.action == "restrict":
            request = await learner_rights.restrict(
                work, args.learner, args.request_id, args.requested_by or "-"
            )
        elif args.action == "lift":
            request = await learner_rights.lift(work, args.request_id)
        else:
            receipts = await learner_rights.replay(work, _progress)
            _progress(f"erased {len(receipts)} learner(s) again")
            return 0 if all(receipt["verified"] for receipt in receipts) else 1
        print(_line(request, datetime.now(UTC)))
        return 0


def _check(args: argparse.Namespace) -> None:
    needs_learner = args.action in ("export", "erase", "restrict")
    needs_request = args.action in ("show", "export", "erase", "restrict", "lift")
    if needs_learner and not (args.learner and is_key(args.learner)):
        args.subparser.error(f"{args.action} needs --learner, {KEY_RULE}")
    if needs_request and not args.request_id:
        args.subparser.error(f"{args.action} needs --request-id")
    if args.action == "export" and args.out is None:
        args.subparser.error("export needs --out DIR")
    if args.action == "list" and not 1 <= args.limit <= 500:
        args.subparser.error("--limit must be between 1 and 500")


def run_command(args: argparse.Namespace) -> int:
    _check(args)
    try:
        if args.action in ("list", "show"):
            return asyncio.run(_read(args))
        return asyncio.run(_process(args) if args.action == "process" else _act(args))
    except (RightsCommandError, RequestError, FileExistsError) as error:
        print(f"nemo rights: error: {error}", file=sys.stderr)
        return 1


__all__ = ["HELP", "Kind", "configure_parser", "identities_from", "run_command"]
